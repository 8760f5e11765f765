"""SPEC 14.8 as a person uses it: the fake's chat page in headless Chromium talks to a real bot process.
A screenshot goes to tests/artifacts/."""

import pytest

from models.commerce import Customer
from tests.support.processes import wait_for
from tests.web.test_browser import ARTIFACTS, browser  # noqa: F401  (the Chromium fixture)

pytestmark = pytest.mark.processes


@pytest.mark.parametrize("backend", ["sqlite"])  # the page and the bot, not the database, are under test here
def test_a_person_starts_the_bot_switches_language_and_opens_a_menu_on_the_chat_page(bots, fake_telegram, browser):  # noqa: F811
    bot = bots.start()
    bots.wait_polling(bot)
    page = browser.new_page(viewport={"width": 800, "height": 700})
    page.goto(fake_telegram.chat_url)
    page.fill("#user-id", "3003")
    page.select_option("#user-lang", "ru")
    page.fill("#user-name", "Аня <img src=x onerror=alert(1)>")
    page.fill("#text", "/start")
    page.click("button[type=submit]")
    page.wait_for_selector("text=Мои подписки", timeout=20000)
    assert page.locator(".bot").first.inner_text().startswith("Добро пожаловать, Аня <img src=x onerror=alert(1)>!")
    assert page.locator(".bot img").count() == 0  # the name was shown as text, not markup
    page.click("text=Язык")
    page.click("text=English", timeout=10000)
    page.wait_for_selector("text=Language: English.", timeout=10000)
    page.click("text=My subscriptions")
    page.wait_for_selector("text=You have no subscriptions yet.", timeout=10000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "bot-chat-page.png"), full_page=True)
    assert Customer.get(Customer.telegram_id == 3003).language_code == "en"


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_person_buys_a_plan_with_stars_on_the_chat_page_and_sees_the_link_and_qr_code(
    bots, workers, shop, fake_telegram, browser  # noqa: F811  (the fixture imported above)
):
    from tests.bot.test_journey import shop_env
    from tests.support.shop import rub_plan

    rub_plan()
    workers.start_huey_consumer(env=shop_env(shop))
    bot = bots.start(env=shop_env(shop))
    bots.wait_polling(bot)
    page = browser.new_page(viewport={"width": 800, "height": 900})
    page.goto(fake_telegram.chat_url)
    page.fill("#user-id", "3004")
    page.select_option("#user-lang", "en")
    page.fill("#user-name", "Ann")
    page.fill("#text", "/start")
    page.click("button[type=submit]")
    page.click("text=Buy", timeout=20000)
    page.click("text=Monthly, 30 days", timeout=10000)
    page.click("text=Telegram Stars: 250 ⭐", timeout=10000)
    page.click(".bot .keyboard button:text-is('Pay')", timeout=10000)
    page.wait_for_selector("text=Your access is ready", timeout=60000)
    caption = page.locator(".bot", has_text="Your access is ready").last
    assert "https://" in caption.inner_text()  # the subscription link, as text
    caption.locator("img").wait_for(timeout=10000)
    page.wait_for_function("() => [...document.querySelectorAll('.bot img')].every(i => i.complete && i.naturalWidth)")
    assert caption.locator("img").evaluate("image => image.naturalWidth") > 100  # the QR code PNG loaded
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "bot-chat-page-stars-purchase.png"), full_page=True)


def test_a_button_presss_answer_shows_on_the_chat_page_as_a_toast_or_an_alert_to_dismiss(fake_telegram, browser):  # noqa: F811
    import requests

    from fakes.telegram import DEV_TOKEN

    api = f"{fake_telegram.base_url}/bot{DEV_TOKEN}"
    buttons = [{"text": "Free trial", "callback_data": "trial"}, {"text": "Menu", "callback_data": "menu"}]
    markup = {"inline_keyboard": [buttons]}
    requests.post(f"{api}/sendMessage", json={"chat_id": 3005, "text": "Main menu", "reply_markup": markup},
                  timeout=5).raise_for_status()  # fmt: skip
    page = browser.new_page(viewport={"width": 800, "height": 700})
    page.goto(fake_telegram.chat_url)
    page.fill("#user-id", "3005")

    def press_and_answer(button, text, alert):
        page.click(f".keyboard button:text-is('{button}')", timeout=10000)
        wait_for(pressed, 10, message="the press reaching the fake")
        query_id = pressed()[-1]
        answer = {"callback_query_id": query_id, "text": text, "show_alert": alert}
        assert requests.post(f"{api}/answerCallbackQuery", json=answer, timeout=5).json()["ok"] is True
        answered.add(query_id)

    answered = set()

    def pressed():
        return [entry["query_id"] for entry in fake_telegram.transcript(3005)
                if entry["kind"] == "press" and entry["query_id"] not in answered]  # fmt: skip

    press_and_answer("Free trial", "You have had your free trial already.", alert=True)
    page.wait_for_selector("#alert:has-text('You have had your free trial already.')", timeout=10000)
    page.click("#alert-ok")
    page.wait_for_selector("#alert-shade", state="hidden", timeout=5000)
    press_and_answer("Menu", "This menu is too old.", alert=False)
    page.wait_for_selector("#toast:has-text('This menu is too old.')", timeout=10000)
    assert page.locator("#alert-shade").is_hidden()
