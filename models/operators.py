"""Panel operators and their sessions (SPEC 4.5)."""

import json

from peewee import BigAutoField, DateTimeField, ForeignKeyField, TextField

from models.base import BaseModel, utcnow


class Operator(BaseModel):
    id = BigAutoField()
    username = TextField(unique=True)
    password_hash = TextField()
    permissions = TextField(default="[]")
    created_at = DateTimeField(default=utcnow)
    disabled_at = DateTimeField(null=True)
    time_zone = TextField(default="UTC")  # an IANA zone: the one the panel's pages show times in

    class Meta:
        table_name = "operators"

    @property
    def permission_set(self):
        return frozenset(json.loads(self.permissions))


class OperatorSession(BaseModel):
    token_hash = TextField(primary_key=True)
    operator = ForeignKeyField(Operator, column_name="operator_id")
    created_at = DateTimeField(default=utcnow)
    expires_at = DateTimeField()

    class Meta:
        table_name = "operator_sessions"


class LoginFailure(BaseModel):
    id = BigAutoField()
    username = TextField()
    client_address = TextField()  # the address, or an IPv6 client's /64 (ops.operators.throttle_address)
    failed_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "operator_login_failures"
