"""What the bot's handlers and loops reach outside the database: payment providers, the public URL, the panel.

Built once from the settings at start (`configure`); a test sets its own
with `use`. The panel is read (never written: the worker does that) for
what only it knows — a subscription's link and the traffic used — and is
None when APP_REMNAWAVE_URL / APP_REMNAWAVE_TOKEN are not set.
"""

from dataclasses import dataclass

from commerce import providers as payment_providers

PANEL_TIMEOUT_S = 5  # a customer waits on it: shorter than the worker's 10 s


@dataclass
class Services:
    providers: dict
    public_url: str
    panel: object = None


_services = None


def configure(settings):
    from integrations.remnawave import RemnawaveClient

    panel = None
    if settings.remnawave_url and settings.remnawave_token:
        panel = RemnawaveClient(settings.remnawave_url, settings.remnawave_token, timeout=PANEL_TIMEOUT_S)
    use(Services(payment_providers.from_settings(settings), settings.public_url, panel))


def use(services):
    global _services
    _services = services


def current():
    global _services
    if _services is None:
        from config.settings import load_settings

        configure(load_settings())
    return _services


class PanelUnavailable(Exception):
    """The panel is not configured here, or did not answer: what only it knows cannot be shown now.
    `unanswered` is False when only this subscription's user cannot be read (not provisioned yet, or
    not on the panel), so asking the panel about another one may still succeed."""

    def __init__(self, reason, unanswered=True):
        super().__init__(reason)
        self.unanswered = unanswered


def remote_user(remote_user_id):
    """The panel's user (its link, its traffic), or None when the panel has no such user."""
    from integrations.remnawave import RemnawaveError

    panel = current().panel
    if panel is None:
        raise PanelUnavailable("no panel configured")
    reference = str(remote_user_id or "")
    if not (reference.isascii() and reference.isdigit()):
        # subscriptions.remote_user_id keeps the panel's number as text
        raise PanelUnavailable("not provisioned", unanswered=False)
    try:
        return panel.get_user(int(reference))
    except RemnawaveError as error:
        raise PanelUnavailable(error.code) from None
