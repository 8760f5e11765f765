"""Gift / code activation and the trial from the bot (SPEC 13.11, 14.4): the menu's "Gift or code" button (or
/code) waits for a code, `/code <code>` activates at once, the Trial button takes the customer's one trial.

Activation settles a free order in the update's transaction
(commerce/activations.py), so the access is set up like a bought one and the
customer hears "your access is ready" when it is. A refused code or trial
gets a plain answer and nothing is written. A wrong code leaves the bot
waiting, so a typo can be sent again; the code's text is never echoed back
or logged (a gift card's code is the gift). Five wrong codes in ten
minutes and the customer's codes are refused unread for a while: a
generated code cannot be guessed, but an operator may choose a short one.
"""

import threading
import time

from bot import keyboards, sessions
from bot.handlers.subscriptions import DATE_FORMAT
from commerce import activations, codes
from models.commerce import Order, Plan
from models.fulfillment import Entitlement

CODE = "code"
# Guessing: after MAX_WRONG_CODES wrong codes within WRONG_CODE_WINDOW_S a customer's codes are refused unread
# until the oldest of them is older than that. Kept in this process (the one bot): a refused update writes
# nothing, so a count in the database would be rolled back with it.
MAX_WRONG_CODES = 5
WRONG_CODE_WINDOW_S = 10 * 60
MAX_CODE_LENGTH = 64
REFUSAL_TEXTS = {
    activations.INVALID_CODE: "code_not_found",
    activations.CODE_EXPIRED: "code_expired",
    activations.CODE_REVOKED: "code_revoked",
    activations.CODE_USED_UP: "code_used",
    activations.CODE_ALREADY_USED: "code_already_activated",
    activations.NO_TRIAL: "trial_none",
    activations.TRIAL_USED: "trial_used",
}


class WrongCodes:
    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self._wrong = {}  # customer id -> monotonic times of their recent wrong codes
        self._lock = threading.Lock()

    def _recent(self, customer_id):
        cutoff = self.clock() - WRONG_CODE_WINDOW_S
        recent = [moment for moment in self._wrong.get(customer_id, ()) if moment > cutoff]
        self._wrong[customer_id] = recent
        return recent

    def blocked(self, customer_id):
        with self._lock:
            return len(self._recent(customer_id)) >= MAX_WRONG_CODES

    def add(self, customer_id):
        with self._lock:
            self._recent(customer_id).append(self.clock())


wrong_codes = WrongCodes()


def _refused(context, rejected):
    return context.refusal(REFUSAL_TEXTS.get(rejected.code, "activation_refused"))


def _activate(customer_id, raw_code):
    """A gift card's code, else an access code's (one code never names both: both are 80 random bits or chosen
    unique among access codes)."""
    if not codes.normalise(raw_code) or len(raw_code) > MAX_CODE_LENGTH:
        raise activations.ActivationRejected(activations.INVALID_CODE, "no such code")
    try:
        return activations.activate_gift_card(customer_id, raw_code)
    except activations.ActivationRejected as rejected:
        if rejected.code != activations.INVALID_CODE:
            raise
    return activations.activate_access_code(customer_id, raw_code)


def _plan_of(activated):
    return Plan.select().join(Order, on=(Order.plan == Plan.id)).where(Order.id == activated.order_id).get()


def _ends_of(activated):
    """When the activated period ends (said instead of its length, which a plan's name often says already:
    "Trial, 3 days")."""
    return Entitlement.get_by_id(activated.entitlement_id).ends_at.strftime(DATE_FORMAT)


def ask(context, chat_id, message_id=None):
    if context.customer is None:
        raise context.refusal("press_start")
    sessions.await_answer(chat_id, context.customer.id, CODE)
    if message_id is None:
        context.send(chat_id, context.text("code_prompt"), keyboards.back(context.language))
    else:
        context.edit(chat_id, message_id, context.text("code_prompt"), keyboards.back(context.language))


def activate(context, chat_id, raw_code):
    if context.customer is None:
        raise context.refusal("press_start")
    if wrong_codes.blocked(context.customer.id):
        raise context.refusal("code_too_many")
    try:
        activated = _activate(context.customer.id, raw_code)
    except activations.ActivationRejected as rejected:
        if rejected.code == activations.INVALID_CODE:
            wrong_codes.add(context.customer.id)
        raise _refused(context, rejected) from None
    plan = _plan_of(activated)
    sessions.stop_awaiting(chat_id, context.customer.id)
    shown = context.text("code_activated", plan=plan.name, ends=_ends_of(activated))
    context.send(chat_id, shown, keyboards.main_menu(context.language))


def on_code_command(message, context):
    _, _, raw_code = (message.text or "").partition(" ")
    if raw_code.strip():
        activate(context, message.chat.id, raw_code.strip())
    else:
        ask(context, message.chat.id)


def on_code_message(message, context):
    activate(context, message.chat.id, (message.text or "").strip())


def trial(context, chat_id, message_id):
    if context.customer is None:
        raise context.refusal("press_start")
    try:
        activated = activations.activate_trial(context.customer.id)
    except activations.ActivationRejected as rejected:
        raise _refused(context, rejected) from None
    shown = context.text("trial_activated", plan=_plan_of(activated).name, ends=_ends_of(activated))
    context.edit(chat_id, message_id, shown, keyboards.main_menu(context.language))


def register(bot, context):
    bot.message_handler(commands=["code"], chat_types=["private"])(lambda message: on_code_command(message, context()))
    bot.message_handler(func=sessions.awaits(CODE), content_types=["text"])(
        lambda message: on_code_message(message, context())
    )
