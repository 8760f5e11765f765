"""Support from the bot: the Support button (or /support) asks for one message; the next text or photo the
customer sends becomes a message of their ticket (ops/support.py). /cancel stops waiting.

The waiting is the chat's `bot_sessions` state (bot/sessions.py,
`{"awaiting": "support"}`, 24 h), written in the press's update transaction;
/cancel stops any waiting (a code's too). A photo is fetched (getFile,
then the download) before the update's transaction opens (`prepare`, run
by bot/updates.py), so no round trip holds it; only when Telegram's stated
size is within the cap, and checked again once fetched. One over the cap,
or any photo while no attachment directory is configured, is refused with
a plain answer and nothing is written (bot/updates.py rolls the update
back), so the customer can try again with a smaller one. A photo's caption is its message's text.
"""

from dataclasses import dataclass

from bot import keyboards, sessions
from integrations import telegram
from models.base import db
from ops import support

SUPPORT = "support"
DEFAULT_MAX_BYTES = 5 << 20
PHOTO_CONTENT_TYPE = "image/jpeg"  # Telegram re-encodes every photo as JPEG
PREPARED_PHOTO = "support_photo"  # the key of a photo fetched before the transaction, in the update's Context


@dataclass(frozen=True)
class SupportFiles:
    directory: str = ""  # "": photos are refused
    max_bytes: int = DEFAULT_MAX_BYTES


def ask(context, chat_id, message_id=None):
    """Wait for the customer's support message in this chat."""
    if context.customer is None:
        raise context.refusal("press_start")
    sessions.await_answer(chat_id, context.customer.id, SUPPORT)
    prompt = context.text("support_prompt", limit=support.MAX_TEXT_LENGTH)
    if message_id is None:
        context.send(chat_id, prompt, keyboards.back(context.language))
    else:
        context.edit(chat_id, message_id, prompt, keyboards.back(context.language))


def on_support_command(message, context):
    ask(context, message.chat.id)


def on_cancel(message, context):
    if context.customer is not None:
        sessions.stop_awaiting(message.chat.id, context.customer.id)
    context.send(message.chat.id, context.text("support_cancelled"), keyboards.main_menu(context.language))


def size_text(context, size):
    if size >= 1 << 20:
        return context.text("size_mb", size=size >> 20)
    return context.text("size_kb", size=max(1, size >> 10))


@dataclass(frozen=True)
class FetchedPhoto:
    """A support photo fetched before the update's transaction: its bytes, or why there are none."""

    content: bytes = b""
    too_large: bool = False
    failure: Exception = None  # a TelegramFailure of getFile or the download


def download(bot, message, files):
    """The message's largest photo from Telegram, refused over the cap before a byte is fetched
    (Telegram's stated size, then getFile's) and once fetched; a FetchedPhoto, never an exception."""
    largest = max(message.photo, key=lambda size: (size.file_size or 0, size.width * size.height))
    if (largest.file_size or 0) > files.max_bytes:
        return FetchedPhoto(too_large=True)
    try:
        found = telegram.call("getFile", bot.get_file, largest.file_id)
        if (found.file_size or 0) > files.max_bytes:
            return FetchedPhoto(too_large=True)
        content = telegram.call("downloadFile", bot.download_file, found.file_path)
    except telegram.TelegramFailure as failure:
        return FetchedPhoto(failure=failure)
    if len(content) > files.max_bytes:
        return FetchedPhoto(too_large=True)
    return FetchedPhoto(content=content)


def prepare(bot, files, pairs):
    """Before the batch's transaction: fetch each photo that will be a support message, kept as
    `context.prepared[PREPARED_PHOTO]`. That is a photo in a private chat waiting for support, or
    from a user with an earlier update in the batch (a Support press before it may start the wait):
    a photo sent to no purpose is not fetched. Without an attachment directory nothing is."""
    if not files.directory:
        return
    seen = set()
    for update, context in pairs:
        message = update.message
        user_id = None if context.user is None else context.user.id
        if message is not None and message.photo and message.chat.type == "private" and user_id is not None:
            if user_id in seen or sessions.awaiting(message.chat.id) == SUPPORT:
                context.prepared[PREPARED_PHOTO] = download(bot, message, files)
        seen.add(user_id)


def fetch_photo(bot, message, files, context):
    """(digest, size, content type) of the message's largest photo, stored; or a refusal.

    The bytes are those prepare() fetched before the transaction; in a transaction nothing is
    fetched (a photo not prepared — its chat began waiting since, from elsewhere — is refused as
    a failure the customer can send again)."""
    if not files.directory:
        raise context.refusal("support_photos_off")
    fetched = context.prepared.get(PREPARED_PHOTO)
    if fetched is None:
        if db.in_transaction():
            raise context.refusal("failure")
        fetched = download(bot, message, files)
    if fetched.too_large:
        raise context.refusal("support_photo_too_large", limit=size_text(context, files.max_bytes))
    if fetched.failure is not None:
        raise fetched.failure  # as a failed call did here: the update fails, nothing written
    content = fetched.content
    return support.store_file(files.directory, content), len(content), PHOTO_CONTENT_TYPE


def on_support_message(bot, message, context, files):
    if context.customer is None:
        raise context.refusal("press_start")
    attachments = [fetch_photo(bot, message, files, context)] if message.photo else []
    text = message.caption if message.photo else message.text
    try:
        ticket, _ = support.customer_writes(context.customer.id, message.chat.id, text or "", attachments)
    except support.SupportRejected:
        raise context.refusal("support_empty") from None
    sessions.stop_awaiting(message.chat.id, context.customer.id)
    context.send(message.chat.id, context.text("support_received", ticket=ticket.id), keyboards.back(context.language))


def register(bot, context, files, applier=None):
    if applier is not None:
        applier.preparers.append(lambda pairs: prepare(bot, files, pairs))
    bot.message_handler(commands=["support"], chat_types=["private"])(
        lambda message: on_support_command(message, context())
    )
    bot.message_handler(commands=["cancel"], chat_types=["private"])(lambda message: on_cancel(message, context()))
    bot.message_handler(func=sessions.awaits(SUPPORT), content_types=["text", "photo"])(
        lambda message: on_support_message(bot, message, context(), files)
    )
