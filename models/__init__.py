"""Peewee models, one module per area; `db` is the one database object."""

from models.base import BaseModel, db, utcnow
from models.blocklists import BLOCKLIST_MODELS
from models.bot import BOT_MODELS
from models.bulk import BULK_MODELS
from models.campaigns import CAMPAIGN_MODELS
from models.catalogue import CATALOGUE_MODELS
from models.commerce import Customer, Order, Plan, Subscription
from models.fulfillment import Entitlement, EntitlementDrift, FulfillmentHistory, FulfillmentOperation
from models.goods import GOODS_MODELS
from models.jobs import QUEUE_MODELS
from models.ledger import LEDGER_MODELS
from models.operators import LoginFailure, Operator, OperatorSession
from models.ops import (
    AnomalyRule,
    AnomalySample,
    AuditEvent,
    CustomerNotice,
    MaintenanceState,
    OperatorNotice,
    OutboxDelivery,
    OutboxDestination,
    OutboxEvent,
)
from models.payments import PAYMENT_MODELS
from models.support import SUPPORT_MODELS
from models.telemetry import TELEMETRY_MODELS

ALL_MODELS = QUEUE_MODELS + [
    Customer,
    Plan,
    Subscription,
    Order,
    Entitlement,
    FulfillmentOperation,
    FulfillmentHistory,
    EntitlementDrift,
    OperatorNotice,
    CustomerNotice,
    AuditEvent,
    OutboxEvent,
    OutboxDestination,
    OutboxDelivery,
    MaintenanceState,
    AnomalyRule,
    AnomalySample,
    Operator,
    OperatorSession,
    LoginFailure,
    *CATALOGUE_MODELS,
    *LEDGER_MODELS,
    *PAYMENT_MODELS,
    *SUPPORT_MODELS,
    *BOT_MODELS,
    *CAMPAIGN_MODELS,
    *BLOCKLIST_MODELS,
    *TELEMETRY_MODELS,
    *GOODS_MODELS,
    *BULK_MODELS,
]

__all__ = ["ALL_MODELS", "BaseModel", "db", "utcnow"]
