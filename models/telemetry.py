"""Telemetry (SPEC 15.9; migration 0037): this installation's anonymous id and the heartbeats a collector stores."""

from peewee import BigAutoField, DateTimeField, IntegerField, TextField

from models.base import BaseModel, utcnow


class TelemetryInstallation(BaseModel):
    """One row (id 1): the random id this installation's heartbeats carry."""

    id = IntegerField(primary_key=True)
    installation_id = TextField()
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "telemetry_installation"


class TelemetryEvent(BaseModel):
    """A heartbeat a collector received: who sent it (an installation id), its version and validated body."""

    id = BigAutoField()
    kind = TextField()
    installation_id = TextField()
    version = TextField()
    payload = TextField()
    received_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "telemetry_events"


TELEMETRY_MODELS = [TelemetryInstallation, TelemetryEvent]
