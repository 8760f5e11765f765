"""A fake Telegram Bot API: a real HTTP server with the methods the bot uses, a control side, faults and a chat page.

Bot API side, `/bot<token>/<method>` (GET or POST; parameters from the query
string, a form, JSON or a multipart upload, as Telegram takes them; answers
`{"ok": true, "result": ...}` or `{"ok": false, "error_code", "description"}`):
getMe, getUpdates (long poll: `timeout` seconds; every update below `offset`
is confirmed and dropped; a newer getUpdates ends a waiting one with 409, as
Telegram does), sendMessage, editMessageText, answerCallbackQuery, sendPhoto
(an uploaded file or a file_id), sendInvoice, answerPreCheckoutQuery,
refundStarPayment, createForumTopic, getChatMember, getFile, and the file
download route `/file/bot<token>/<path>`. A wrong token gets 401.

Control side (Python methods, or HTTP under `/_fake/`, unauthenticated: the
fake is for 127.0.0.1): inject what a user does — a message, a photo, a
button press, a pre_checkout_query, a successful_payment — or a raw update
(its update_id may repeat one already queued: that is Telegram delivering an
update again); read each chat's transcript, every accepted call, the answers
to callbacks and pre-checkout queries, the forum topics; set membership;
with `record=True`, every Bot API exchange (the parameters and files each
request carried, the status and body of its answer, as sent: `exchanges()`;
off by default, so a long-running dev fake does not grow);
inject faults per method: 429 with retry_after, 403 (and `block(chat)` for a
user who blocked the bot), 5xx, slow answers (the call takes effect, its
answer comes `delay` seconds later).

`/chat` is a small page on which a person talks to the bot as a Telegram user
would: type messages, press inline buttons, see the answers (it polls the
control side; every text is put in the page as text, never as markup).

Update ids start where Telegram's may: at a random high number, not at 1 (a
bot that remembers the ids it applied must not take a restarted fake's for
repeats). With a state file (`--state-file`, the dev stack's
var/fake-telegram.state) the chats, their messages, the queued updates and the
update counter are kept across restarts: written every SAVE_INTERVAL_S when
they changed and when the fake stops, read back at start (`--fresh`: start
empty).

Run it with `python omniflow.py fake-telegram`.
"""

import base64
import email.parser
import email.policy
import hashlib
import json
import os
import secrets
import threading
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from fakes.http_server import ServedFake

DEV_TOKEN = "123456789:omniflow-fake-telegram-dev-token-0000"
DEFAULT_PORT = 8081
MAX_REQUEST_BYTES = 20 << 20  # sendPhoto uploads
MAX_UPDATES_PER_CALL = 100
MAX_TEXT_LENGTH = 4096
MAX_CALLBACK_DATA_BYTES = 64
MAX_BUTTONS_PER_ROW = 8  # an inline keyboard's sizes, as aiogram's InlineKeyboardBuilder keeps them
MAX_BUTTONS = 100
BUTTON_ACTIONS = {"url", "callback_data", "web_app", "login_url", "switch_inline_query",
                  "switch_inline_query_current_chat", "switch_inline_query_chosen_chat", "copy_text", "callback_game",
                  "pay"}  # a button has exactly one  # fmt: skip
FAULTS = ("429", "403", "5xx", "slow")
CHAT_PAGE = Path(__file__).with_name("telegram_chat.html")
SAVE_INTERVAL_S = 1.0
# A press on a message older than this carries an InaccessibleMessage (no content, date 0), as Telegram's does.
MESSAGE_ACCESSIBLE_S = 48 * 3600
STATE_VERSION = 1

METHODS = (
    "getMe",
    "getUpdates",
    "sendMessage",
    "editMessageText",
    "answerCallbackQuery",
    "sendPhoto",
    "sendInvoice",
    "answerPreCheckoutQuery",
    "refundStarPayment",
    "createForumTopic",
    "getChatMember",
    "getFile",
)
# getChatMember's statuses, each answered with the fields its ChatMember type has (a restricted user is
# still a member, with no rights; a banned one until 0, for ever).
CHAT_MEMBER_STATUSES = ("creator", "administrator", "member", "restricted", "left", "kicked")
ADMINISTRATOR_RIGHTS = ("can_manage_chat", "can_delete_messages", "can_manage_video_chats", "can_restrict_members",
                        "can_promote_members", "can_change_info", "can_invite_users", "can_post_stories",
                        "can_edit_stories", "can_delete_stories", "can_send_welcome_messages")  # fmt: skip
RESTRICTED_RIGHTS = ("can_send_messages", "can_send_audios", "can_send_documents", "can_send_photos",
                     "can_send_videos", "can_send_video_notes", "can_send_voice_notes", "can_send_polls",
                     "can_send_other_messages", "can_add_web_page_previews", "can_react_to_messages", "can_edit_tag",
                     "can_change_info", "can_invite_users", "can_pin_messages", "can_manage_topics")  # fmt: skip
# Methods whose first parameter is a chat: a 403 for a blocked user applies to them.
CHAT_METHODS = ("sendMessage", "editMessageText", "sendPhoto", "sendInvoice")


class ApiError(Exception):
    """Ends a Bot API call with Telegram's error shape."""

    def __init__(self, status, description, parameters=None):
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


def _bad_request(description):
    return ApiError(400, f"Bad Request: {description}")


class FakeTelegram(ServedFake):
    """The fake. start() serves it on a background thread; base_url is APP_TELEGRAM_API_URL for the bot."""

    server_name = "FakeTelegramBotAPI"
    thread_name = "fake-telegram"

    def __init__(
        self,
        token=DEV_TOKEN,
        host="127.0.0.1",
        port=0,
        bot_username="omniflow_dev_bot",
        state_file=None,
        fresh=False,
        record=False,
    ):
        self._init_served(host, port)
        self.token = token
        self.record = record
        self.state_file = None if state_file is None else Path(state_file)
        self._saved = None  # the state last written, so an unchanged world is not written again
        self._saver = None
        self.bot_user = {
            "id": int(token.split(":", 1)[0]),
            "is_bot": True,
            "first_name": "Omniflow",
            "username": bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self._lock = threading.RLock()
        self._arrived = threading.Condition(self._lock)
        self._reset_state()
        if self.state_file is not None and self.state_file.exists() and not fresh:
            self._load_state()

    # --- lifecycle ---------------------------------------------------------

    def bind(self):
        super().bind()
        if self.state_file is not None and (self._saver is None or not self._saver.is_alive()):
            self._saver = threading.Thread(target=self._save_while_serving, name="fake-telegram-state", daemon=True)
            self._saver.start()
        return self

    def _release(self):
        super()._release()  # ends slow answers
        with self._arrived:
            self._arrived.notify_all()  # and long polls
        self.save_state()

    @property
    def chat_url(self):
        return f"{self.base_url}/chat"

    # --- state ---------------------------------------------------------------

    def _reset_state(self):
        self._updates = []  # queued, unconfirmed, in delivery order
        self._next_update_id = first_update_id()
        self._poll_generation = 0
        self._delivered = {}  # update_id -> how many getUpdates answers carried it
        self._transcripts = {}  # chat_id -> [entry]
        self._next_message_id = {}
        self._calls = {}
        self._accepted = []  # every call that took effect: method, chat_id, params
        self._faults = []
        self._faults_injected = {}
        self._blocked = set()
        self._callbacks = {}  # callback_query_id -> answer or None
        self._pressed_in = {}  # callback_query_id -> the chat whose transcript shows the press
        self._pre_checkouts = {}  # pre_checkout_query_id -> answer or None
        self._charges = {}  # telegram_payment_charge_id -> {"user_id", "refunded"}
        self._topics = {}  # chat_id -> [topic]
        self._next_thread_id = 100
        self._members = {}  # (chat, user_id) -> status
        self._files = {}  # file_id -> (path, bytes)
        self._exchanges = []  # with record=True: every Bot API request and its answer

    def _state(self):
        """What a restart keeps: the world as users and the bot see it, not the calls, faults or stats."""
        with self._lock:
            return {
                "version": STATE_VERSION,
                "next_update_id": self._next_update_id,
                "updates": self._updates,
                "transcripts": {str(chat): entries for chat, entries in self._transcripts.items()},
                "next_message_id": {str(chat): number for chat, number in self._next_message_id.items()},
                "callbacks": self._callbacks,
                "pressed_in": self._pressed_in,
                "pre_checkouts": self._pre_checkouts,
                "charges": self._charges,
                "topics": self._topics,
                "next_thread_id": self._next_thread_id,
                "members": [[chat, user_id, status] for (chat, user_id), status in self._members.items()],
                "files": {key: [path, base64.b64encode(data).decode()] for key, (path, data) in self._files.items()},
                "blocked": sorted(self._blocked),
            }

    def _load_state(self):
        state = json.loads(self.state_file.read_text())
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"{self.state_file} is not a state this fake wrote; start with --fresh")
        self._next_update_id = state["next_update_id"]
        self._updates = state["updates"]
        self._transcripts = {int(chat): entries for chat, entries in state["transcripts"].items()}
        self._next_message_id = {int(chat): number for chat, number in state["next_message_id"].items()}
        self._callbacks = state["callbacks"]
        self._pressed_in = state["pressed_in"]
        self._pre_checkouts = state["pre_checkouts"]
        self._charges = state["charges"]
        self._topics = state["topics"]
        self._next_thread_id = state["next_thread_id"]
        self._members = {(chat, user_id): status for chat, user_id, status in state["members"]}
        self._files = {key: (path, base64.b64decode(data)) for key, (path, data) in state["files"].items()}
        self._blocked = set(state["blocked"])

    def save_state(self):
        """Write the state file if the world changed since it was last written (no state file: nothing)."""
        if self.state_file is None:
            return
        with self._lock:  # the lists in it change under other threads' requests
            data = json.dumps(self._state(), ensure_ascii=False, sort_keys=True).encode()
        if data == self._saved:
            return
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        partial = self.state_file.with_name(self.state_file.name + ".partial")
        partial.write_bytes(data)
        os.replace(partial, self.state_file)  # a crash mid-write leaves the previous state whole
        self._saved = data

    def _save_while_serving(self):
        while not self._stopping.wait(SAVE_INTERVAL_S):
            self.save_state()

    def reset(self):
        with self._arrived:
            self._reset_state()
            self._poll_generation += 1
            self._arrived.notify_all()

    def discard_pending(self):
        """Drop every queued update, as if confirmed; update ids keep counting up (a load test's rounds)."""
        with self._arrived:
            self._updates = []
            self._arrived.notify_all()

    # --- control: what a user does ---------------------------------------------

    def send_message(self, user, text, chat_id=None):
        """The user writes `text` to the bot; returns the update."""
        user = _user(user)
        with self._lock:
            message = self._user_message(user, chat_id, text=str(text))
            if str(text).startswith("/"):
                command = str(text).split()[0] if str(text).split() else str(text)
                message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(command)}]
            return self._queue({"message": message})

    def send_photo(self, user, content, caption=None, chat_id=None):
        """The user sends a photo (bytes); the bot can fetch it with getFile."""
        user = _user(user)
        with self._lock:
            file_id = "photo-" + secrets.token_hex(8)
            self._files[file_id] = (f"photos/{file_id}.jpg", bytes(content))
            size = {"file_id": file_id, "file_unique_id": file_id[6:], "width": 800, "height": 600,
                    "file_size": len(content)}  # fmt: skip
            message = self._user_message(user, chat_id, photo=[size])
            if caption is not None:
                message["caption"] = str(caption)
            return self._queue({"message": message})

    def press(self, user, data, message_id=None, chat_id=None):
        """The user presses an inline button whose callback data is `data` (any string: forgeries too)."""
        user = _user(user)
        chat = chat_id if chat_id is not None else user["id"]
        with self._lock:
            transcript = self._transcripts.get(chat, [])
            if message_id is None:
                with_buttons = [m for m in transcript if m["from"] == "bot" and m.get("reply_markup")]
                message_id = with_buttons[-1]["message_id"] if with_buttons else None
            shown = next((m for m in transcript if m["message_id"] == message_id and m["from"] == "bot"), None)
            if shown is not None:  # the message with the button, as Telegram shows it: its text, photo or invoice
                message = {**self._message_json(chat, shown), "chat": _private_chat(user, chat)}
            else:  # no message of the bot's has that id (a forged press): one with nothing in it
                message = {"message_id": message_id or 0, "from": self.bot_user, "chat": _private_chat(user, chat),
                           "date": int(time.time())}  # fmt: skip
            if shown and shown["at"] < time.time() - MESSAGE_ACCESSIBLE_S:
                message = {"message_id": message_id, "chat": _private_chat(user, chat), "date": 0}
            query_id = str(secrets.randbits(63))
            self._callbacks[query_id] = None
            self._pressed_in[query_id] = chat
            self._record(
                chat,
                {"from": "user", "kind": "press", "data": str(data), "message_id": message_id, "query_id": query_id},
            )
            return self._queue(
                {
                    "callback_query": {
                        "id": query_id,
                        "from": user,
                        "message": message,
                        "chat_instance": str(chat),
                        "data": str(data),
                    }
                }
            )

    def pre_checkout(self, user, currency, total_amount, invoice_payload):
        """Telegram asks the bot to confirm a payment before taking it."""
        user = _user(user)
        with self._lock:
            query_id = str(secrets.randbits(63))
            self._pre_checkouts[query_id] = None
            return self._queue(
                {
                    "pre_checkout_query": {
                        "id": query_id,
                        "from": user,
                        "currency": currency,
                        "total_amount": int(total_amount),
                        "invoice_payload": invoice_payload,
                    }
                }
            )

    def successful_payment(self, user, currency, total_amount, invoice_payload, charge_id=None, chat_id=None):
        """The payment went through: a service message with successful_payment."""
        user = _user(user)
        charge_id = charge_id or "stxfake" + secrets.token_hex(12)
        with self._lock:
            self._charges.setdefault(charge_id, {"user_id": user["id"], "refunded": False})
            payment = {
                "currency": currency,
                "total_amount": int(total_amount),
                "invoice_payload": invoice_payload,
                "telegram_payment_charge_id": charge_id,
                "provider_payment_charge_id": "",
            }
            return self._queue({"message": self._user_message(user, chat_id, successful_payment=payment)})

    def pay_invoice(self, user, message_id, chat_id=None, wait_seconds=10.0):
        """The user pays an invoice the bot sent, as Telegram runs it: a pre_checkout_query first; when the
        bot answers ok within `wait_seconds`, the successful_payment message (from a background thread).
        Returns the pre_checkout_query update."""
        user = _user(user)
        chat = chat_id if chat_id is not None else user["id"]
        with self._lock:
            invoice = next(
                (
                    m
                    for m in self._transcripts.get(chat, [])
                    if m["message_id"] == message_id and m["kind"] == "invoice"
                ),
                None,
            )
            if invoice is None:
                raise ValueError("no such invoice in this chat")
            currency, total = invoice["invoice"]["currency"], invoice["invoice"]["total_amount"]
            query = self.pre_checkout(user, currency, total, invoice["invoice_payload"])
        query_id = query["pre_checkout_query"]["id"]

        def settle():
            deadline = time.monotonic() + wait_seconds
            while time.monotonic() < deadline and not self._stopping.is_set():
                with self._lock:
                    answer = self._pre_checkouts.get(query_id)
                if answer is not None:
                    if answer["ok"]:
                        self.successful_payment(user, currency, total, invoice["invoice_payload"], chat_id=chat)
                    return
                self._stopping.wait(0.05)

        threading.Thread(target=settle, name="fake-telegram-payment", daemon=True).start()
        return query

    def inject(self, update):
        """Queue a raw update. With an update_id already queued, it is the same update delivered again."""
        update = dict(update)
        with self._lock:
            if "update_id" in update:
                update_id = int(update["update_id"])
                self._next_update_id = max(self._next_update_id, update_id + 1)
                update["update_id"] = update_id
                return self._enqueue(update)
            return self._queue(update)

    def age_chat(self, chat_id, seconds):
        """The chat as it will be `seconds` from now: every entry that much older (a press on a message
        older than MESSAGE_ACCESSIBLE_S reaches the bot without it)."""
        with self._lock:
            for entry in self._transcripts.get(int(chat_id), []):
                entry["at"] -= seconds

    def block(self, chat_id, blocked=True):
        """The user blocked the bot: every send to the chat gets 403."""
        with self._lock:
            (self._blocked.add if blocked else self._blocked.discard)(int(chat_id))

    def set_member(self, chat_id, user_id, status):
        """getChatMember's answer for this user in this chat from now on: one of CHAT_MEMBER_STATUSES."""
        if status not in CHAT_MEMBER_STATUSES:
            raise ValueError(f"status must be one of {', '.join(CHAT_MEMBER_STATUSES)}")
        with self._lock:
            self._members[(str(chat_id), int(user_id))] = status

    # --- control: reading --------------------------------------------------------

    def transcript(self, chat_id):
        """The chat as a person sees it, oldest first: the user's messages and presses, the bot's messages."""
        with self._lock:
            return [json.loads(json.dumps(entry)) for entry in self._transcripts.get(int(chat_id), [])]

    def bot_messages(self, chat_id):
        return [entry for entry in self.transcript(chat_id) if entry["from"] == "bot"]

    def accepted(self, method=None):
        """Every call that took effect, oldest first."""
        with self._lock:
            return [dict(call) for call in self._accepted if method in (None, call["method"])]

    def exchanges(self, method=None):
        """With record=True: every Bot API call, oldest first, as it crossed the wire — method, params (the
        values as sent: strings from a query or form, JSON values from a JSON body), files ({name: bytes}),
        status and body (the JSON answer)."""
        with self._lock:
            return [dict(exchange) for exchange in self._exchanges if method in (None, exchange["method"])]

    def accepted_count(self, method=None):
        """How many calls took effect, without copying them (a load test polls this)."""
        with self._lock:
            if method is None:
                return len(self._accepted)
            return sum(1 for call in self._accepted if call["method"] == method)

    def callback_answers(self):
        with self._lock:
            return {key: value for key, value in self._callbacks.items() if value is not None}

    def pre_checkout_answers(self):
        with self._lock:
            return {key: value for key, value in self._pre_checkouts.items() if value is not None}

    def topics(self, chat_id):
        with self._lock:
            return [dict(topic) for topic in self._topics.get(str(chat_id), [])]

    def stats(self):
        with self._lock:
            return {
                "calls": dict(self._calls),
                "faults_injected": dict(self._faults_injected),
                "pending_updates": len(self._updates),
                "deliveries": {str(key): value for key, value in self._delivered.items()},
            }

    def waiting(self, offset=None):
        """How many queued updates a getUpdates with this offset would be given."""
        with self._lock:
            return sum(1 for update in self._updates if offset is None or update["update_id"] >= offset)

    def delivered(self, update_id):
        """How many getUpdates answers carried this update."""
        with self._lock:
            return self._delivered.get(int(update_id), 0)

    # --- control: faults -----------------------------------------------------------

    def set_fault(self, method, fault, count=None, retry_after=3, delay=12.0, chat_id=None, after=0):
        """Make the next `count` calls of `method` ("*": any) misbehave; count None: every call until cleared.
        The first `after` of those calls go through untouched (a fault from the second poll on).

        fault: "429" (Too Many Requests with retry_after, nothing done), "403"
        (Forbidden, nothing done), "5xx" (500, nothing done), "slow" (done, the
        answer sent `delay` seconds later). `chat_id` limits it to one chat.
        """
        if fault not in FAULTS:
            raise ValueError(f"fault must be one of {', '.join(FAULTS)}")
        if method != "*" and method not in METHODS:
            raise ValueError(f"unknown method {method!r}")
        if count is not None and int(count) <= 0:
            raise ValueError("count must be positive")
        with self._lock:
            self._faults.append(
                {
                    "method": method,
                    "fault": fault,
                    "remaining": None if count is None else int(count),
                    "retry_after": int(retry_after),
                    "delay": float(delay),
                    "chat_id": None if chat_id is None else str(chat_id),
                    "after": int(after),
                }
            )
            return self.faults()

    def clear_faults(self):
        with self._lock:
            self._faults = []

    def faults(self):
        with self._lock:
            return [dict(rule) for rule in self._faults]

    def _draw_fault(self, method, params):
        with self._lock:
            chat = params.get("chat_id")
            for rule in self._faults:
                if rule["method"] not in ("*", method):
                    continue
                if rule["chat_id"] is not None and rule["chat_id"] != str(chat):
                    continue
                if rule["after"] > 0:
                    rule["after"] -= 1
                    return None
                if rule["remaining"] is not None:
                    rule["remaining"] -= 1
                    if rule["remaining"] == 0:
                        self._faults.remove(rule)
                key = f"{method}:{rule['fault']}"
                self._faults_injected[key] = self._faults_injected.get(key, 0) + 1
                return dict(rule)
            return None

    # --- queueing updates ------------------------------------------------------------

    def _queue(self, update):
        update["update_id"] = self._next_update_id
        self._next_update_id += 1
        return self._enqueue(update)

    def _enqueue(self, update):
        with self._arrived:
            self._updates.append(update)
            self._arrived.notify_all()
        return json.loads(json.dumps(update))

    def _user_message(self, user, chat_id, **content):
        chat = chat_id if chat_id is not None else user["id"]
        message_id = self._new_message_id(chat)
        message = {
            "message_id": message_id,
            "from": user,
            "chat": _private_chat(user, chat),
            "date": int(time.time()),
            **content,
        }
        entry = {"from": "user", "kind": "message", "message_id": message_id, "text": content.get("text")}
        if "photo" in content:
            entry["kind"] = "photo"
        if "successful_payment" in content:
            entry["kind"] = "successful_payment"
        self._record(chat, entry)
        return message

    def _new_message_id(self, chat):
        with self._lock:
            message_id = self._next_message_id.get(chat, 1)
            self._next_message_id[chat] = message_id + 1
            return message_id

    def _record(self, chat, entry):
        entry.setdefault("at", time.time())
        self._transcripts.setdefault(int(chat), []).append(entry)

    # --- HTTP ------------------------------------------------------------------------

    def _serve(self, handler):
        try:
            self._dispatch(handler)
        except OSError:
            handler.close_connection = True  # the client went away

    def _dispatch(self, handler):
        parts = urlsplit(handler.path)
        length = handler.headers.get("Content-Length")
        if length and (not (length.isascii() and length.isdigit()) or int(length) > MAX_REQUEST_BYTES):
            self._json(handler, 413, {"ok": False, "error_code": 413, "description": "Request Entity Too Large"})
            handler.close_connection = True
            return
        raw = handler.rfile.read(int(length)) if length else b""
        path = parts.path
        if path == "/chat" and handler.command == "GET":
            self._page(handler)
        elif path.startswith("/_fake/files/") and handler.command == "GET":
            self._file_content(handler, path[len("/_fake/files/") :])
        elif path.startswith("/_fake/"):
            self._control_route(handler, path, parts.query, raw)
        elif path.startswith("/file/bot"):
            self._file_route(handler, path)
        elif path.startswith("/bot"):
            self._api_route(handler, path, parts.query, raw)
        else:
            self._json(handler, 404, {"ok": False, "error_code": 404, "description": "Not Found"})

    def _api_route(self, handler, path, query, raw):
        token, _, method = path[len("/bot") :].partition("/")
        params, files = {}, {}
        if token != self.token:
            status, body = 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        elif method not in METHODS:
            status, body = 404, {"ok": False, "error_code": 404, "description": "Not Found"}
        else:
            with self._lock:
                self._calls[method] = self._calls.get(method, 0) + 1
            try:
                params, files = _parameters(handler, query, raw)
                status, body = 200, {"ok": True, "result": self._api_call(method, params, files)}
            except ApiError as error:
                status, body = error.status, {"ok": False, "error_code": error.status, "description": error.description}
                if error.parameters:
                    body["parameters"] = error.parameters
        if self.record:  # before the answer leaves, so a client that got it finds it recorded
            sent = json.loads(json.dumps(body))
            exchange = {"method": method, "params": params, "files": files, "status": status, "body": sent}
            with self._lock:
                self._exchanges.append(exchange)
        self._json(handler, status, body)

    def _api_call(self, method, params, files):
        """The call's result, or ApiError; a slow fault answers `delay` seconds after the call took effect."""
        fault = self._draw_fault(method, params)
        if fault and fault["fault"] == "429":
            retry_after = fault["retry_after"]
            raise ApiError(429, f"Too Many Requests: retry after {retry_after}", {"retry_after": retry_after})
        if fault and fault["fault"] == "5xx":
            raise ApiError(500, "Internal Server Error")
        if fault and fault["fault"] == "403":
            raise ApiError(403, "Forbidden: bot was blocked by the user")
        if method in CHAT_METHODS and _int(params.get("chat_id"), "chat_id") in self._blocked:
            raise ApiError(403, "Forbidden: bot was blocked by the user")
        result = getattr(self, "_api_" + method)(params, files)
        if fault and fault["fault"] == "slow":
            self._stopping.wait(fault["delay"])
        return result

    def _json(self, handler, status, body):
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _accept(self, method, chat_id, params, **extra):
        with self._lock:
            self._accepted.append({"method": method, "chat_id": chat_id, "params": dict(params), **extra})

    # --- the Bot API methods ---------------------------------------------------------

    def _api_getMe(self, params, files):
        return dict(self.bot_user)

    def _api_getUpdates(self, params, files):
        offset = params.get("offset")
        limit = _int(params.get("limit", MAX_UPDATES_PER_CALL), "limit")
        timeout = _int(params.get("timeout", 0), "timeout")
        if not 1 <= limit <= MAX_UPDATES_PER_CALL:
            limit = MAX_UPDATES_PER_CALL
        deadline = time.monotonic() + max(0, timeout)
        with self._arrived:
            self._poll_generation += 1
            generation = self._poll_generation
            self._arrived.notify_all()  # a waiting getUpdates is superseded by this one
            if offset not in (None, ""):
                offset = _int(offset, "offset")
                if offset < 0:
                    self._updates = self._updates[offset:]
                else:
                    self._updates = [update for update in self._updates if update["update_id"] >= offset]
            while not self._updates and not self._stopping.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._arrived.wait(remaining)
                if self._poll_generation != generation:
                    raise ApiError(
                        409,
                        "Conflict: terminated by other getUpdates request; "
                        "make sure that only one bot instance is running",
                    )
            answer = self._updates[:limit]
            for update in answer:
                self._delivered[update["update_id"]] = self._delivered.get(update["update_id"], 0) + 1
            return json.loads(json.dumps(answer))

    def _api_sendMessage(self, params, files):
        chat = _int(_required(params, "chat_id"), "chat_id")
        text = _text(params)
        markup = _markup(params)
        message = self._bot_message(chat, params, text=text, markup=markup)
        self._accept("sendMessage", chat, params, message_id=message["message_id"])
        return message

    def _api_editMessageText(self, params, files):
        chat = _int(_required(params, "chat_id"), "chat_id")
        message_id = _int(_required(params, "message_id"), "message_id")
        text = _text(params)
        markup = _markup(params)
        with self._lock:
            entry = next(
                (m for m in self._transcripts.get(chat, []) if m["from"] == "bot" and m["message_id"] == message_id),
                None,
            )
            if entry is None:
                raise _bad_request("message to edit not found")
            if entry.get("text") == text and entry.get("reply_markup") == markup:
                raise _bad_request(
                    "message is not modified: specified new message content and reply markup are exactly the same "
                    "as a current content and reply markup of the message"
                )
            entry["text"] = text
            entry["edited"] = True
            entry["edited_at"] = time.time()
            if markup is None:
                entry.pop("reply_markup", None)
            else:
                entry["reply_markup"] = markup
            self._accept("editMessageText", chat, params, message_id=message_id)
            return self._message_json(chat, entry)

    def _api_answerCallbackQuery(self, params, files):
        query_id = str(_required(params, "callback_query_id"))
        with self._lock:
            if query_id not in self._callbacks:
                raise _bad_request("query is too old and response timeout expired or query ID is invalid")
            if self._callbacks[query_id] is not None:
                raise _bad_request("query is too old and response timeout expired or query ID is invalid")
            self._callbacks[query_id] = {
                "text": params.get("text"),
                "show_alert": _bool(params.get("show_alert")),
                "at": time.time(),
            }
            if params.get("text"):  # shown to the user over the chat (a toast, or an alert to dismiss)
                press = next(
                    (
                        entry
                        for entry in self._transcripts.get(self._pressed_in.get(query_id), [])
                        if entry.get("query_id") == query_id
                    ),
                    None,
                )
                if press is not None:
                    press["answer"] = {"text": str(params["text"]), "show_alert": _bool(params.get("show_alert"))}
            self._accept("answerCallbackQuery", None, params)
        return True

    def _api_sendPhoto(self, params, files):
        chat = _int(_required(params, "chat_id"), "chat_id")
        if "photo" in files:
            content = files["photo"]
            if not content:
                raise _bad_request("file must be non-empty")
            file_id = "photo-" + hashlib.sha256(content).hexdigest()[:16]
            with self._lock:
                self._files[file_id] = (f"photos/{file_id}.png", content)
            size, digest = len(content), hashlib.sha256(content).hexdigest()
        else:
            file_id = str(_required(params, "photo"))
            with self._lock:
                if file_id not in self._files:
                    raise _bad_request("wrong file identifier/HTTP URL specified")
                content = self._files[file_id][1]
            size, digest = len(content), hashlib.sha256(content).hexdigest()
        caption = params.get("caption")
        if caption is not None and len(caption) > 1024:
            raise _bad_request("message caption is too long")
        photo = [{"file_id": file_id, "file_unique_id": file_id[6:], "width": 512, "height": 512, "file_size": size}]
        message = self._bot_message(chat, params, text=caption, markup=_markup(params), photo=photo, sha256=digest)
        self._accept("sendPhoto", chat, params, message_id=message["message_id"], sha256=digest, size=size)
        return message

    def _api_sendInvoice(self, params, files):
        chat = _int(_required(params, "chat_id"), "chat_id")
        title = str(_required(params, "title"))
        description = str(_required(params, "description"))
        payload = str(_required(params, "payload"))
        currency = str(_required(params, "currency"))
        prices = _json_param(params, "prices")
        if not isinstance(prices, list) or not prices:
            raise _bad_request("prices must be a non-empty array")
        try:
            total = sum(int(price["amount"]) for price in prices)
        except (TypeError, KeyError, ValueError):
            raise _bad_request("can't parse prices JSON object") from None
        if currency == "XTR" and (len(prices) != 1 or params.get("provider_token")):
            raise _bad_request("Stars invoices take exactly one price and no provider token")
        invoice = {"title": title, "description": description, "start_parameter": "", "currency": currency,
                   "total_amount": total}  # fmt: skip
        message = self._bot_message(chat, params, text=title, markup=_markup(params), invoice=invoice,
                                    invoice_payload=payload)  # fmt: skip
        self._accept("sendInvoice", chat, params, message_id=message["message_id"])
        return message

    def _api_answerPreCheckoutQuery(self, params, files):
        query_id = str(_required(params, "pre_checkout_query_id"))
        ok = _bool(_required(params, "ok"))
        if not ok and not params.get("error_message"):
            raise _bad_request("error_message is required when ok is false")
        with self._lock:
            if self._pre_checkouts.get(query_id, "missing") is not None:
                raise _bad_request("query is too old and response timeout expired or query ID is invalid")
            self._pre_checkouts[query_id] = {"ok": ok, "error_message": params.get("error_message"), "at": time.time()}
            self._accept("answerPreCheckoutQuery", None, params)
        return True

    def _api_refundStarPayment(self, params, files):
        user_id = _int(_required(params, "user_id"), "user_id")
        charge_id = str(_required(params, "telegram_payment_charge_id"))
        with self._lock:
            charge = self._charges.get(charge_id)
            if charge is None or charge["user_id"] != user_id:
                raise _bad_request("CHARGE_NOT_FOUND")
            if charge["refunded"]:
                raise _bad_request("CHARGE_ALREADY_REFUNDED")
            charge["refunded"] = True
            self._accept("refundStarPayment", user_id, params)
        return True

    def _api_createForumTopic(self, params, files):
        chat = str(_required(params, "chat_id"))
        name = str(_required(params, "name"))
        if not 1 <= len(name) <= 128:
            raise _bad_request("topic name must be 1-128 characters")
        with self._lock:
            self._next_thread_id += 1
            topic = {"message_thread_id": self._next_thread_id, "name": name, "icon_color": 7322096}
            self._topics.setdefault(chat, []).append(topic)
            self._accept("createForumTopic", chat, params)
            return dict(topic)

    def _api_getChatMember(self, params, files):
        chat = str(_required(params, "chat_id"))
        user_id = _int(_required(params, "user_id"), "user_id")
        with self._lock:
            status = self._members.get((chat, user_id), "left")
        return _chat_member(status, {"id": user_id, "is_bot": False, "first_name": f"user {user_id}"})

    def _api_getFile(self, params, files):
        file_id = str(_required(params, "file_id"))
        with self._lock:
            if file_id not in self._files:
                raise _bad_request("invalid file_id")
            path, content = self._files[file_id]
        return {"file_id": file_id, "file_unique_id": file_id[6:], "file_size": len(content), "file_path": path}

    def _bot_message(self, chat, params, text=None, markup=None, **content):
        message_id = self._new_message_id(chat)
        entry = {"from": "bot", "kind": "message", "message_id": message_id, "text": text}
        if markup is not None:
            entry["reply_markup"] = markup
        thread = params.get("message_thread_id")
        if thread not in (None, ""):
            entry["message_thread_id"] = _int(thread, "message_thread_id")
        for key in ("photo", "invoice", "invoice_payload", "sha256"):
            if key in content:
                entry[key] = content[key]
        if "photo" in content:
            entry["kind"] = "photo"
        if "invoice" in content:
            entry["kind"] = "invoice"
        with self._lock:
            self._record(chat, entry)
        return self._message_json(chat, entry)

    def _message_json(self, chat, entry):
        message = {
            "message_id": entry["message_id"],
            "from": self.bot_user,
            "chat": {"id": chat, "type": "private" if chat > 0 else "supergroup"},
            "date": int(entry["at"]),
        }
        if entry.get("kind") == "photo":
            message["photo"] = entry["photo"]
            if entry.get("text") is not None:
                message["caption"] = entry["text"]
        elif entry.get("kind") == "invoice":
            message["invoice"] = entry["invoice"]
        else:
            message["text"] = entry.get("text") or ""
        if entry.get("edited_at"):
            message["edit_date"] = int(entry["edited_at"])
        if entry.get("reply_markup"):
            message["reply_markup"] = entry["reply_markup"]
        if entry.get("message_thread_id"):
            message["message_thread_id"] = entry["message_thread_id"]
            message["is_topic_message"] = True
        return message

    # --- files, the chat page, the control routes ------------------------------------------

    def _file_route(self, handler, path):
        token, _, file_path = path[len("/file/bot") :].partition("/")
        with self._lock:
            content = next((data for stored, data in self._files.values() if stored == file_path), None)
        if token != self.token or content is None:
            self._json(handler, 404, {"ok": False, "error_code": 404, "description": "Not Found"})
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(len(content)))
        handler.end_headers()
        handler.wfile.write(content)

    def _file_content(self, handler, file_id):
        with self._lock:
            stored = self._files.get(file_id)
        if stored is None:
            self._json(handler, 404, {"error": "no such file"})
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "image/png" if stored[0].endswith(".png") else "image/jpeg")
        handler.send_header("Content-Length", str(len(stored[1])))
        handler.end_headers()
        handler.wfile.write(stored[1])

    def _page(self, handler):
        data = CHAT_PAGE.read_bytes()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        handler.send_header("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline' 'self'; "
                            "style-src 'unsafe-inline'")  # fmt: skip
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _control_route(self, handler, path, query, raw):
        try:
            payload = json.loads(raw) if raw else {}
            if not isinstance(payload, dict):
                raise ValueError("the body must be a JSON object")
            status, body = self._control(handler.command, path, dict(parse_qsl(query)), payload)
        except (ValueError, TypeError, KeyError) as error:
            status, body = 400, {"error": str(error)}
        except ApiError as error:
            status, body = 400, {"error": error.description}
        self._json(handler, status, body)

    def _control(self, method, path, query, payload):
        parts = path.strip("/").split("/")[1:]
        if method == "POST" and parts == ["messages"]:
            return 200, self.send_message(payload["user"], payload["text"])
        if method == "POST" and parts == ["presses"]:
            return 200, self.press(payload["user"], payload["data"], message_id=payload.get("message_id"))
        if method == "POST" and parts == ["invoices", "pay"]:
            return 200, self.pay_invoice(payload["user"], int(payload["message_id"]))
        if method == "POST" and parts == ["pre_checkout"]:
            return 200, self.pre_checkout(
                payload["user"], payload["currency"], payload["total_amount"], payload["invoice_payload"]
            )
        if method == "POST" and parts == ["payments"]:
            return 200, self.successful_payment(
                payload["user"], payload["currency"], payload["total_amount"], payload["invoice_payload"],
                charge_id=payload.get("telegram_payment_charge_id"),
            )  # fmt: skip
        if method == "POST" and parts == ["updates"]:
            return 200, self.inject(payload["update"])
        if method == "GET" and len(parts) == 2 and parts[0] == "chats":
            return 200, {"chat_id": int(parts[1]), "messages": self.transcript(int(parts[1]))}
        if method == "GET" and parts == ["calls"]:
            return 200, {"calls": self.accepted(query.get("method"))}
        if method == "GET" and parts == ["stats"]:
            return 200, self.stats()
        if method == "GET" and len(parts) == 2 and parts[0] == "topics":
            return 200, {"topics": self.topics(parts[1])}
        if method == "GET" and parts == ["faults"]:
            return 200, {"faults": self.faults()}
        if method == "POST" and parts == ["faults"]:
            if payload.pop("clear", False):
                self.clear_faults()
            if payload:
                self.set_fault(**payload)
            return 200, {"faults": self.faults()}
        if method == "POST" and parts == ["blocks"]:
            self.block(payload["chat_id"], bool(payload.get("blocked", True)))
            return 200, {"blocked": bool(payload.get("blocked", True))}
        if method == "POST" and parts == ["members"]:
            self.set_member(payload["chat_id"], payload["user_id"], payload["status"])
            return 200, {"status": payload["status"]}
        if method == "POST" and parts == ["reset"]:
            self.reset()
            return 200, {"reset": True}
        return 404, {"error": "no such control route"}


def first_update_id():
    """Where a fake with no state numbers updates from: a random high point, as Telegram does after a week
    without updates, so ids a bot applied before a restart are not dealt out again."""
    return (1 << 20) + secrets.randbelow(1 << 30)


def _user(user):
    """A Telegram User from an id or a dict with at least an id."""
    if isinstance(user, int):
        user = {"id": user}
    if not isinstance(user, dict) or not isinstance(user.get("id"), int) or user["id"] <= 0:
        raise ValueError("user must be a positive integer id or an object with one")
    shaped = {"id": user["id"], "is_bot": False, "first_name": str(user.get("first_name") or f"User {user['id']}")}
    for key in ("last_name", "username", "language_code"):
        if user.get(key):
            shaped[key] = str(user[key])
    return shaped


def _chat_member(status, user):
    """A ChatMember of Telegram's for this status: the fields its type requires."""
    member = {"status": status, "user": user}
    if status in ("creator", "administrator"):
        member["is_anonymous"] = False
    if status == "administrator":
        member.update({"can_be_edited": False, **dict.fromkeys(ADMINISTRATOR_RIGHTS, True)})
    if status == "restricted":
        member.update({"is_member": True, **dict.fromkeys(RESTRICTED_RIGHTS, False), "until_date": 0})
    if status == "kicked":
        member["until_date"] = 0
    return member


def _private_chat(user, chat):
    shaped = {"id": chat, "type": "private" if chat > 0 else "supergroup", "first_name": user["first_name"]}
    if user.get("username"):
        shaped["username"] = user["username"]
    return shaped


def _parameters(handler, query, raw):
    """The call's parameters (strings or decoded JSON) and uploaded files, wherever Telegram would accept them."""
    params = dict(parse_qsl(query, keep_blank_values=True))
    files = {}
    content_type = handler.headers.get("Content-Type", "")
    if raw and content_type.startswith("application/json"):
        try:
            body = json.loads(raw)
        except ValueError:
            raise _bad_request("can't parse JSON") from None
        if not isinstance(body, dict):
            raise _bad_request("the body must be a JSON object")
        params.update(body)
    elif raw and content_type.startswith("application/x-www-form-urlencoded"):
        params.update(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
    elif raw and content_type.startswith("multipart/form-data"):
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw
        )
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if not name:
                continue
            content = part.get_payload(decode=True) or b""
            if part.get_filename() is not None:
                files[name] = content
            else:
                params[name] = content.decode("utf-8", "replace")
    return params, files


def _required(params, name):
    value = params.get(name)
    if value in (None, ""):
        raise _bad_request(f"{name} is empty")
    return value


def _int(value, name):
    if isinstance(value, bool):
        raise _bad_request(f"{name} must be an integer")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _bad_request(f"{name} must be an integer") from None


def _bool(value):
    return value is True or str(value).lower() in ("true", "1")


def _text(params):
    text = params.get("text")
    if text in (None, ""):
        raise _bad_request("message text is empty")
    text = str(text)
    if len(text) > MAX_TEXT_LENGTH:
        raise _bad_request("message is too long")
    return text


def _json_param(params, name):
    value = params.get(name)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise _bad_request(f"can't parse {name} JSON object") from None
    return value


def _markup(params):
    """The inline keyboard, checked as Telegram checks it: callback data of 1-64 bytes, a button with a text
    and an action, at most 8 buttons a row and 100 in all."""
    markup = _json_param(params, "reply_markup")
    if markup in (None, "", {}):
        return None
    rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
    if not isinstance(rows, list):
        raise _bad_request("can't parse reply keyboard markup JSON object")
    widths = [len(row) if isinstance(row, list) else 1 for row in rows]
    if any(width > MAX_BUTTONS_PER_ROW for width in widths) or sum(widths) > MAX_BUTTONS:
        raise _bad_request("BUTTONS_TOO_MUCH")
    for row in rows:
        for button in row if isinstance(row, list) else [None]:
            if not isinstance(button, dict) or not button.get("text") or not set(button) & BUTTON_ACTIONS:
                raise _bad_request(
                    "can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"
                )
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= MAX_CALLBACK_DATA_BYTES:
                raise _bad_request("BUTTON_DATA_INVALID")
    return markup


def default_token():
    """(token, is the dev token): APP_TELEGRAM_BOT_TOKEN from the environment or .env, else the development one."""
    import os

    token = os.environ.get("APP_TELEGRAM_BOT_TOKEN", "").strip()
    dotenv_file = Path(__file__).resolve().parent.parent / ".env"
    if not token and dotenv_file.exists():
        from dotenv import dotenv_values

        token = (dotenv_values(dotenv_file).get("APP_TELEGRAM_BOT_TOKEN") or "").strip()
    return (token, False) if token else (DEV_TOKEN, True)


def run_cli(host="127.0.0.1", port=DEFAULT_PORT, state_file=None, fresh=False):
    """`python omniflow.py fake-telegram`: serve in the foreground until Ctrl-C or SIGTERM."""
    import signal

    token, is_dev = default_token()
    fake = FakeTelegram(token=token, host=host, port=port, state_file=state_file, fresh=fresh)

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    fake.bind()
    print(f"fake Telegram Bot API on {fake.base_url} (APP_TELEGRAM_API_URL)", flush=True)
    if is_dev:  # the fixed development token is no secret; a configured one is never printed
        print(f"token: {token}", flush=True)
    else:
        print("token: APP_TELEGRAM_BOT_TOKEN (from the environment or .env)", flush=True)
    print(f"chat page: {fake.chat_url}", flush=True)
    if state_file is not None:
        print(f"state: {state_file} ({'started empty' if fresh else 'kept across restarts'})", flush=True)
    print("control: POST /_fake/messages|presses|pre_checkout|payments|updates|faults, GET /_fake/chats/ID", flush=True)
    try:
        fake.serve_forever()
    except KeyboardInterrupt:
        pass
    print("fake Telegram Bot API stopped", flush=True)
