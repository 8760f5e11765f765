"""Peewee models, one module per area; `db` is the one database object."""

from models.base import BaseModel, db, utcnow

__all__ = ["BaseModel", "db", "utcnow"]
