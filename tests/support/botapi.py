"""The Telegram Bot API's contract as aiogram publishes it (every method and type a pydantic model, kept
current with Telegram's documentation), and a check of one recorded exchange against it.

`request_problems(method, params, files)`: the method exists; every parameter is one of the model's
fields (and none Telegram has deprecated); each value reads as its field's type the way Telegram reads a
query, a form or a JSON body (numbers and booleans from their text, objects and arrays from JSON, files
from the multipart upload); the required ones are there; the model validates the decoded call; and the
limits the documentation states hold (texts, captions, callback data, inline keyboards, invoices).

`response_problems(method, status, body)`: the body is Telegram's `{"ok", "result"}` or `{"ok": false,
"error_code", "description", "parameters"}` shape with the status it came with, and `result` is the
method's return type field by field — JSON types exact (an integer is no string, a date is Unix time),
no field the type does not have, no null (Telegram leaves out a field it has no value for), no empty
message text — and validates as aiogram's model (`Response[<return type>]`). getUpdates' updates carry
exactly one kind each, in increasing update_id order; an edited message has its edit_date.

Each problem is a sentence naming the path to the value (`reply_markup.inline_keyboard[0][1].text`).
"""

import datetime
import functools
import json
import re
import types
import typing

from pydantic import BaseModel, ValidationError


@functools.cache
def _aiogram():
    """aiogram, imported on first use: building its models takes seconds, which every test process that
    only collects this module would pay."""
    import aiogram.methods
    from aiogram.client.default import Default
    from aiogram.methods.base import Response, TelegramMethod
    from aiogram.types import BufferedInputFile, InlineKeyboardButton, InputFile
    from aiogram.utils.keyboard import InlineKeyboardBuilder

    methods = {
        model.__api_method__: model
        for model in vars(aiogram.methods).values()
        if isinstance(model, type)
        and issubclass(model, TelegramMethod)
        and isinstance(getattr(model, "__api_method__", None), str)
    }
    return types.SimpleNamespace(
        methods=methods, Default=Default, Response=Response, BufferedInputFile=BufferedInputFile,
        InlineKeyboardButton=InlineKeyboardButton, InputFile=InputFile, InlineKeyboardBuilder=InlineKeyboardBuilder,
    )  # fmt: skip


# What the Bot API documentation states for the parameters the bot sends: (least, most, unit).
CHARACTERS, BYTES = "characters", "bytes"
LIMITS = {
    ("sendMessage", "text"): (1, 4096, CHARACTERS),
    ("editMessageText", "text"): (1, 4096, CHARACTERS),
    ("sendPhoto", "caption"): (0, 1024, CHARACTERS),
    ("answerCallbackQuery", "text"): (0, 200, CHARACTERS),
    ("sendInvoice", "title"): (1, 32, CHARACTERS),
    ("sendInvoice", "description"): (1, 255, CHARACTERS),
    ("sendInvoice", "payload"): (1, 128, BYTES),
    ("createForumTopic", "name"): (1, 128, CHARACTERS),
    ("answerPreCheckoutQuery", "error_message"): (1, 255, CHARACTERS),
}
CALLBACK_DATA_BYTES = (1, 64)
# "Exactly one of the optional fields must be used to specify type of the button."
BUTTON_ACTIONS = (
    "url",
    "callback_data",
    "web_app",
    "login_url",
    "switch_inline_query",
    "switch_inline_query_current_chat",
    "switch_inline_query_chosen_chat",
    "copy_text",
    "callback_game",
    "pay",
)
NEVER_EMPTY = {("Message", "text"), ("Message", "caption")}
BOOLEAN_WORDS = ("true", "false", "1", "0")
INTEGER = re.compile(r"-?[0-9]+")
NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")
UPLOADED = object()  # a file that came as a part of the multipart upload


# --- requests -------------------------------------------------------------------------------------------


def request_problems(method, params, files=()):
    api = _aiogram()
    model = api.methods.get(method)
    if model is None:
        return [f"{method}: no such Bot API method"]
    fields = _fields(model)
    problems = []
    decoded = {}
    for name in [*params, *files]:
        field = fields.get(name)
        if field is None:
            problems.append(f"{method}.{name}: not a parameter of {method}")
            continue
        if (field.json_schema_extra or {}).get("deprecated"):
            problems.append(f"{method}.{name}: deprecated in the Bot API")
        if name in files:
            if not _accepts_file(field.annotation):
                problems.append(f"{method}.{name}: sent as a file upload, which it does not take")
            decoded[name] = UPLOADED
            continue
        value, trouble = _read_parameter(field.annotation, params[name], f"{method}.{name}")
        problems += trouble
        if not trouble:
            decoded[name] = value
    for name, field in fields.items():
        if field.is_required() and name not in params and name not in files:
            problems.append(f"{method}.{name}: required, not sent")
    for name, value in decoded.items():
        if value is not UPLOADED:
            problems += _shape(fields[name].annotation, value, f"{method}.{name}")
    if problems:
        return problems
    try:
        model.model_validate(
            {name: api.BufferedInputFile(b"", name) if value is UPLOADED else value for name, value in decoded.items()}
        )
    except ValidationError as error:
        return [f"{method}: {line}" for line in _errors(error)]
    return _limit_problems(method, decoded)


def _read_parameter(annotation, value, path):
    """The value Telegram reads for a parameter of this type: a query or form value is text (a number, a
    boolean, or an object or array as JSON); a JSON body's value is already typed."""
    if not isinstance(value, str):
        return value, []
    members = _members(annotation)
    if str in members:
        return value, []
    if int in members and INTEGER.fullmatch(value):
        return int(value), []
    if float in members and NUMBER.fullmatch(value):
        return float(value), []
    if bool in members and value.lower() in BOOLEAN_WORDS:
        return value.lower() in ("true", "1"), []
    if any(_is_structured(member) for member in members):
        try:
            return json.loads(value), []
        except ValueError:
            return None, [f"{path}: {value[:40]!r} is not JSON"]
    return None, [f"{path}: {value[:40]!r} does not read as {_name(annotation)}"]


def _limit_problems(method, values):
    problems = []
    for (limited, name), (least, most, unit) in LIMITS.items():
        if limited == method and isinstance(values.get(name), str):
            size = len(values[name].encode()) if unit == BYTES else len(values[name])
            if not least <= size <= most:
                problems.append(f"{method}.{name}: {size} {unit}, the Bot API takes {least}-{most}")
    markup = values.get("reply_markup")
    if isinstance(markup, dict) and "inline_keyboard" in markup:
        problems += keyboard_problems(markup["inline_keyboard"], f"{method}.reply_markup")
    if method == "sendInvoice" and values.get("currency") == "XTR":
        if len(values.get("prices") or []) != 1:
            problems.append("sendInvoice.prices: a Stars invoice takes exactly one price")
        if values.get("provider_token"):
            problems.append("sendInvoice.provider_token: a Stars invoice takes none")
    if method == "answerPreCheckoutQuery" and values.get("ok") is False and not values.get("error_message"):
        problems.append("answerPreCheckoutQuery.error_message: required when ok is false")
    return problems


def keyboard_problems(rows, path):
    """An inline keyboard: rows and button counts within aiogram's InlineKeyboardBuilder's limits (8 a row,
    100 in all), each button with a text and exactly one action, callback data of 1-64 bytes."""
    problems = []
    api = _aiogram()
    try:
        api.InlineKeyboardBuilder(markup=[[api.InlineKeyboardButton(**button) for button in row] for row in rows])
    except (ValueError, TypeError) as error:
        problems.append(f"{path}.inline_keyboard: {error}")
    for row_index, row in enumerate(rows):
        if not row:
            problems.append(f"{path}.inline_keyboard[{row_index}]: an empty row")
        for index, button in enumerate(row):
            where = f"{path}.inline_keyboard[{row_index}][{index}]"
            if not button.get("text"):
                problems.append(f"{where}.text: empty")
            actions = [name for name in BUTTON_ACTIONS if button.get(name) is not None]
            if len(actions) != 1:
                problems.append(f"{where}: {len(actions)} actions ({', '.join(actions)}), exactly one is allowed")
            data = button.get("callback_data")
            least, most = CALLBACK_DATA_BYTES
            if isinstance(data, str) and not least <= len(data.encode()) <= most:
                problems.append(f"{where}.callback_data: {len(data.encode())} bytes, the Bot API takes {least}-{most}")
            url = button.get("url")
            if isinstance(url, str) and not url.startswith(("https://", "http://", "tg://")):
                problems.append(f"{where}.url: {url[:40]!r} is no http(s) or tg link")
    return problems


# --- responses ------------------------------------------------------------------------------------------


def response_problems(method, status, body):
    api = _aiogram()
    model = api.methods.get(method)
    if not isinstance(body, dict) or not isinstance(body.get("ok"), bool):
        return [f"{method}: the answer is not the Bot API's {{ok, ...}} object"]
    problems = []
    if body["ok"]:
        if status != 200:
            problems.append(f"{method}: ok with HTTP {status}")
        if "result" not in body:
            problems.append(f"{method}: ok without a result")
        extra = set(body) - {"ok", "result", "description"}
    else:
        if body.get("error_code") != status or not 400 <= status < 600:
            problems.append(f"{method}: error_code {body.get('error_code')!r} with HTTP {status}")
        if not isinstance(body.get("description"), str) or not body["description"]:
            problems.append(f"{method}: an error without a description")
        extra = set(body) - {"ok", "error_code", "description", "parameters"}
    if extra:
        problems.append(f"{method}: the answer has {sorted(extra)}, which the Bot API's answers do not")
    if model is None:
        return problems + ([] if not body["ok"] else [f"{method}: answered, but no such Bot API method"])
    returning = model.__returning__
    if body["ok"] and "result" in body:
        problems += _shape(returning, body["result"], f"{method} result")
    if "parameters" in body:
        problems += _shape(
            api.Response.model_fields["parameters"].annotation, body["parameters"], f"{method} parameters"
        )
    if problems:
        return problems
    try:
        answer = api.Response[returning].model_validate(body)
    except ValidationError as error:
        return [f"{method} answer: {line}" for line in _errors(error)]
    if method == "getUpdates" and body["ok"]:
        problems += _update_problems(answer.result)
    if method.startswith("editMessage") and body["ok"] and isinstance(body["result"], dict):
        if "edit_date" not in body["result"]:
            problems.append(f"{method} result: an edited message without edit_date")
    return problems


def _update_problems(updates):
    problems = []
    for update in updates:
        kinds = [name for name, value in update if name != "update_id" and value is not None]
        if len(kinds) != 1:
            problems.append(f"update {update.update_id}: {len(kinds)} kinds ({', '.join(kinds)}), Telegram sends one")
    ids = [update.update_id for update in updates]
    if ids != sorted(set(ids)):
        problems.append(f"getUpdates: update ids {ids} are not increasing")
    return problems


# --- the shape of a JSON value against an aiogram type ----------------------------------------------------


def _shape(annotation, value, path):
    """Why the JSON `value` is not a value of `annotation` ([]: it is)."""
    annotation = _unwrap(annotation)
    members = _members(annotation)
    if len(members) > 1:
        closest = None
        for member in _candidates(members, value):
            problems = _shape(member, value, path)
            if not problems:
                return []
            closest = problems if closest is None or len(problems) < len(closest) else closest
        return closest or [f"{path}: no value"]
    origin = typing.get_origin(annotation)
    if annotation is typing.Any:
        return []
    if origin is typing.Literal:
        allowed = [getattr(choice, "value", choice) for choice in typing.get_args(annotation)]
        return [] if value in allowed else [f"{path}: {value!r} is none of {allowed}"]
    if origin in (list, typing.List):  # noqa: UP006 - the annotation may name either
        if not isinstance(value, list):
            return [f"{path}: {_json_type(value)}, not an array"]
        (item,) = typing.get_args(annotation) or (typing.Any,)
        return [problem for index, element in enumerate(value) for problem in _shape(item, element, f"{path}[{index}]")]
    if origin is dict or annotation is dict:
        return [] if isinstance(value, dict) else [f"{path}: {_json_type(value)}, not an object"]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _model_shape(annotation, value, path)
    if isinstance(annotation, type) and issubclass(annotation, (_aiogram().Default, _aiogram().InputFile)):
        return [f"{path}: {_json_type(value)} where only a client-side {annotation.__name__} fits"]
    expected = {
        bool: lambda v: isinstance(v, bool),
        int: lambda v: isinstance(v, int) and not isinstance(v, bool),
        float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        str: lambda v: isinstance(v, str),
        datetime.datetime: lambda v: isinstance(v, int) and not isinstance(v, bool),  # Unix time
    }.get(annotation)
    if expected is None:
        raise TypeError(f"{path}: no JSON reading of {annotation!r} is known here")
    return [] if expected(value) else [f"{path}: {_json_type(value)} {_short(value)}, not {_name(annotation)}"]


def _model_shape(model, value, path):
    if not isinstance(value, dict):
        return [f"{path}: {_json_type(value)}, not a {model.__name__} object"]
    fields = _fields(model)
    problems = []
    for key, item in value.items():
        field = fields.get(key)
        if field is None:
            problems.append(f"{path}.{key}: not a field of {model.__name__}")
        elif item is None:
            problems.append(f"{path}.{key}: null (Telegram leaves out a field it has no value for)")
        elif item == "" and (model.__name__, key) in NEVER_EMPTY:
            problems.append(f"{path}.{key}: empty (Telegram leaves out a {key} a message does not have)")
        else:
            problems += _shape(field.annotation, item, f"{path}.{key}")
    for key, field in fields.items():
        if field.is_required() and key not in value:
            problems.append(f"{path}.{key}: required in {model.__name__}, missing")
    return problems


def _candidates(members, value):
    """The union's members worth reporting against: those whose fixed (Literal) fields the value carries,
    each as fixed, as `status` picks a ChatMember type; all of them when none does."""
    members = [member for member in members if member is not type(None)]
    if not isinstance(value, dict):
        return members
    matching = []
    for member in members:
        if not (isinstance(member, type) and issubclass(member, BaseModel)):
            continue
        fixed = {
            key: typing.get_args(_unwrap(field.annotation))
            for key, field in _fields(member).items()
            if typing.get_origin(_unwrap(field.annotation)) is typing.Literal
        }
        if fixed and all(key in value and value[key] in allowed for key, allowed in fixed.items()):
            matching.append(member)
    return matching or members


def _fields(model):
    """{the name on the wire (`from`, not `from_user`): FieldInfo}."""
    return {field.alias or name: field for name, field in model.model_fields.items()}


def _unwrap(annotation):
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _members(annotation):
    annotation = _unwrap(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(_unwrap(member) for member in typing.get_args(annotation))
    return (annotation,)


def _is_structured(annotation):
    origin = typing.get_origin(annotation)
    return origin in (list, dict) or (isinstance(annotation, type) and issubclass(annotation, BaseModel))


def _accepts_file(annotation):
    file = _aiogram().InputFile
    return any(isinstance(member, type) and issubclass(member, file) for member in _members(annotation))


def _json_type(value):
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), type(value).__name__
    )


def _short(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _name(annotation):
    return getattr(annotation, "__name__", str(annotation))


def _errors(error):
    return [f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}" for item in error.errors()][:10]
