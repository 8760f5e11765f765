"""Every text the bot shows, in Russian and English (SPEC 14.4), and the operator notices' wording.

One dict per language; `text(language, key, **values)` picks the language
(English when a key or a language is missing) and fills `{name}` fields.
Texts are sent as plain text (no parse mode), so a customer's name or a
plan's name can never turn into markup.
"""

from integrations.payments.amounts import to_decimal_text

LANGUAGES = ("ru", "en")
DEFAULT_LANGUAGE = "en"

CATALOG = {
    "en": {
        "welcome": "Welcome, {name}! This bot sells and manages your VPN access.",
        "welcome_back": "Welcome back, {name}!",
        "main_menu": "Main menu: choose what you need.",
        "button_subscriptions": "My subscriptions",
        "button_language": "Language",
        "button_back": "« Back",
        "language_prompt": "Choose the bot's language:",
        "language_set": "Language: English.",
        "subscriptions_none": "You have no subscriptions yet.",
        "subscriptions_header": "Your subscriptions:",
        "callback_refused": "This button is not valid any more. Send /start for a fresh menu.",
        "message_too_old": "This message is too old to change. Here is a fresh menu.",
        "blocked": "Your account is blocked. Contact support if you think this is a mistake.",
        "unknown_command": "I don't know the command {command}. Send /start for the menu.",
        "too_long": "That message is too long: at most {limit} characters, please.",
        "not_understood": "I work with buttons and commands. Send /start for the menu.",
        "press_start": "Send /start to begin.",
        "checkout_refused": "This payment can't be accepted. Start again from the menu.",
        "failure": "Something went wrong on our side. Please try again in a minute.",
        "payment_unmatched": "We received your payment but could not match it to an order. "
        "An operator will sort it out or refund it.",
        # --- buying (bot/handlers/buy.py) ---
        "button_buy": "Buy",
        "button_shop": "🛍 Shop",
        "shop_header": "Digital goods on sale. Choose one:",
        "shop_none": "No goods are on sale right now. Please look again later.",
        "goods_button": "{goods}: {prices}",
        "goods_methods_none": "{goods} can't be paid for here right now.",
        "goods_methods_header": "{goods}: how would you like to pay? The code is sent here once it is bought.",
        "notice_goods_paid_from_wallet": "Paid {price} from your wallet for {goodsName}. Its code follows in a moment.",
        "notice_goods_payment_received": "Payment received: {price}. The code of your {goodsName} follows in a moment.",
        "plans_header": "Plans on sale. Choose one:",
        "plans_none": "Nothing is on sale right now. Please look again later.",
        "plan_button": "{plan}, {duration}: {prices}",
        "duration_one": "{days} day",
        "duration_few": "{days} days",
        "duration_many": "{days} days",
        "methods_header": "{plan}: how would you like to pay?",
        "offer_note": "Your personal offer: {discount} off, until {ends} UTC.",
        "rating_thanks": "Thank you for your rating!",
        "rating_already": "This purchase is rated already.",
        "rating_expired": "Ratings are taken for a day after a purchase.",
        "methods_none": "This plan can't be paid for here right now.",
        "extend_or_new": "You already have {plan}. Extend your subscription by {duration} (the same link, a later "
        "end), or buy a new subscription with a link of its own?",
        "button_extend": "Extend my subscription",
        "button_extend_until": "Extend my subscription (ends {ends} UTC)",
        "button_new_subscription": "New subscription",
        "extend_methods_header": "{plan}: {duration} more after {ends} UTC, on the same link. How would you like to "
        "pay?",
        "button_gift": "🎁 Buy as a gift",
        "gift_methods_header": "A gift card for {plan}: you get a code to pass on, and whoever activates it gets "
        "the plan. How would you like to pay?",
        "notice_gift_paid_from_wallet": "Paid {price} from your wallet for a {plan} gift card. "
        "Its code follows in a moment.",
        "notice_gift_payment_received": "Payment received: {price}. The code of your gift card follows in a moment.",
        "method_stars": "Telegram Stars: {price}",
        "method_wallet": "Wallet: {price} (balance {balance})",
        "method_yookassa": "Card (YooKassa): {price}",
        "method_cryptobot": "CryptoBot: {price}",
        "button_pay_link": "Pay",
        "invoice_sent": "Here is your invoice for {plan}: {price}.",
        "pay_by_link": "Order {order}: {plan}, {price}. Pay on the page the button opens; "
        "we will message you as soon as the payment arrives.",
        "notice_paid_from_wallet": "Paid {price} from your wallet for {plan}. Your access is being set up: "
        "we will message you when it is ready.",
        "notice_payment_received": "Payment received: {price}. Your access is being set up: "
        "we will message you when it is ready.",
        "maintenance": "The shop is closed for maintenance. Nothing can be bought right now; please try again later.",
        "insufficient_funds": "Your wallet balance is not enough for this purchase.",
        "gift_unavailable": "Gift cards can't be bought right now. Please try again later.",
        "purchase_refused": "This purchase can't be made right now. Start again from the menu.",
        "payment_unavailable": "The payment page could not be opened. Please try again in a minute.",
        "precheck_order_not_pending": "This order has expired or was already paid. Start again from the menu.",
        "precheck_amount_mismatch": "The price has changed. Start again from the menu for the current price.",
        "precheck_currency_mismatch": "This order is paid in Telegram Stars (XTR) only, not in {currency}. "
        "Start again from the menu.",
        "precheck_maintenance_active": "The shop is closed for maintenance. Please try again later.",
        # --- the wallet and auto-renewal (bot/handlers/wallet.py, bot/handlers/subscriptions.py) ---
        "button_wallet": "Wallet",
        "wallet_header": "Your wallet",
        "wallet_empty": "Your wallet is empty.",
        "wallet_balance": "Balance: {balance}",
        "wallet_history_header": "Latest movements:",
        "wallet_history_line": "{when} UTC  {amount}  {what}",
        "wallet_topup_prompt": "Top it up with one of the buttons below.",
        "wallet_topup_none": "Top-ups are not available right now.",
        "button_topup": "Top up {amount} ({method})",
        "topup_method_yookassa": "card",
        "topup_method_cryptobot": "CryptoBot",
        "topup_by_link": "Top-up {order}: {amount}. Pay on the page the button opens; "
        "we will message you as soon as the money arrives.",
        "ledger_topup": "top-up",
        "ledger_purchase": "purchase",
        "ledger_renewal": "renewal",
        "ledger_refund": "refund",
        "ledger_expiration": "bonus expired",
        "ledger_bonus": "bonus",
        "ledger_proration_credit": "unused time credited",
        "button_auto_renew_on": "Auto-renew {number}: on (turn off)",
        "button_auto_renew_off": "Auto-renew {number}: off (turn on)",
        "auto_renew_on": "Auto-renew is on for {plan}: the wallet pays for the next period a day before it ends.",
        "auto_renew_off": "Auto-renew is off for {plan}.",
        # --- My subscriptions and notices (bot/handlers/menu.py, bot/customer_notices.py) ---
        "subscription_detail": "{number}. {plan}: {phase}, until {ends} UTC; traffic used {traffic}",
        "subscription_link": "   Link: {link}",
        "phase_provisioning": "being set up",
        "phase_active": "active",
        "phase_expiring": "active, ends soon",
        "phase_grace": "in its grace period",
        "phase_expired": "expired",
        "phase_paused": "paused",
        "phase_failed": "could not be set up (we are on it)",
        "button_qr": "QR code {number}",
        "qr_caption": "Scan to add the subscription to your VPN app:\n{link}",
        "link_unavailable": "The link can't be shown right now. Please try again in a minute.",
        "notice_access_renewed": "Your subscription is renewed: {plan} until {ends} UTC. Your link stays the same.",
        "notice_access_ready": "Your access is ready: {plan} until {ends} UTC.\n"
        "Add this link to your VPN app (or scan the QR code):\n{link}",
        "notice_order_refunded": "Order {orderId} was refunded: {price} goes back the way you paid. "
        "It may take a few days to arrive.",
        "notice_gift_revoked": "The gift subscription {plan} was withdrawn: the person who gave it was refunded. "
        "Your access through it is switched off.",
        "notice_order_refunded_full": "Order {orderId} was refunded: {price} goes back the way you paid "
        "(it may take a few days to arrive). The access it bought is switched off.",
        "notice_order_refunded_wallet": "Order {orderId} was refunded: {price} was added to your wallet.",
        "notice_order_refunded_wallet_full": "Order {orderId} was refunded: {price} was added to your wallet. "
        "The access it bought is switched off.",
        "notice_wallet_credited": "Your wallet was topped up with {price}. Balance: {balance}.",
        "notice_dunning": "Your wallet could not pay {price} for the renewal of {plan}. "
        "Top it up before {ends} UTC to keep your access.",
    },
    "ru": {
        "welcome": "Добро пожаловать, {name}! Этот бот продаёт VPN-доступ и управляет им.",
        "welcome_back": "С возвращением, {name}!",
        "main_menu": "Главное меню: выберите, что нужно.",
        "button_subscriptions": "Мои подписки",
        "button_language": "Язык",
        "button_back": "« Назад",
        "language_prompt": "Выберите язык бота:",
        "language_set": "Язык: русский.",
        "subscriptions_none": "У вас пока нет подписок.",
        "subscriptions_header": "Ваши подписки:",
        "callback_refused": "Эта кнопка больше не действует. Отправьте /start, чтобы открыть меню заново.",
        "message_too_old": "Это сообщение слишком старое, его уже не изменить. Вот свежее меню.",
        "blocked": "Ваш аккаунт заблокирован. Если это ошибка, напишите в поддержку.",
        "unknown_command": "Команда {command} мне незнакома. Отправьте /start, чтобы открыть меню.",
        "too_long": "Сообщение слишком длинное: не больше {limit} символов.",
        "not_understood": "Я понимаю кнопки и команды. Отправьте /start, чтобы открыть меню.",
        "press_start": "Отправьте /start, чтобы начать.",
        "checkout_refused": "Этот платёж нельзя принять. Начните заново из меню.",
        "failure": "У нас что-то пошло не так. Попробуйте ещё раз через минуту.",
        "payment_unmatched": "Мы получили ваш платёж, но не смогли сопоставить его с заказом. "
        "Оператор разберётся или вернёт деньги.",
        # --- покупка (bot/handlers/buy.py) ---
        "button_buy": "Купить",
        "button_shop": "🛍 Магазин",
        "shop_header": "Цифровые товары. Выберите:",
        "shop_none": "Сейчас товаров нет. Загляните позже.",
        "goods_button": "{goods}: {prices}",
        "goods_methods_none": "«{goods}» сейчас нельзя оплатить здесь.",
        "goods_methods_header": "{goods}: как хотите оплатить? Код придёт сюда, как только товар будет куплен.",
        "notice_goods_paid_from_wallet": "Списано {price} с кошелька за «{goodsName}». Код придёт следующим "
        "сообщением.",
        "notice_goods_payment_received": "Платёж получен: {price}. Код товара «{goodsName}» придёт следующим "
        "сообщением.",
        "plans_header": "Тарифы. Выберите:",
        "plans_none": "Сейчас ничего не продаётся. Загляните позже.",
        "plan_button": "{plan}, {duration}: {prices}",
        "duration_one": "{days} день",
        "duration_few": "{days} дня",
        "duration_many": "{days} дней",
        "methods_header": "{plan}: как хотите оплатить?",
        "offer_note": "Ваше персональное предложение: скидка {discount} до {ends} UTC.",
        "rating_thanks": "Спасибо за оценку!",
        "rating_already": "Эта покупка уже оценена.",
        "rating_expired": "Оценку можно поставить в течение суток после покупки.",
        "methods_none": "Этот тариф сейчас нельзя оплатить здесь.",
        "extend_or_new": "У вас уже есть «{plan}». Продлить подписку на {duration} (ссылка та же, окончание позже) "
        "или купить новую подписку с отдельной ссылкой?",
        "button_extend": "Продлить мою подписку",
        "button_extend_until": "Продлить мою подписку (до {ends} UTC)",
        "button_new_subscription": "Новая подписка",
        "extend_methods_header": "«{plan}»: ещё {duration} после {ends} UTC, по той же ссылке. Как хотите оплатить?",
        "button_gift": "🎁 Купить в подарок",
        "gift_methods_header": "Подарочная карта «{plan}»: вы получите код, и тот, кто его активирует, получит "
        "тариф. Как хотите оплатить?",
        "notice_gift_paid_from_wallet": "Списано {price} с кошелька за подарочную карту «{plan}». Код придёт следующим "
        "сообщением.",
        "notice_gift_payment_received": "Платёж получен: {price}. Код подарочной карты придёт следующим сообщением.",
        "method_stars": "Telegram Stars: {price}",
        "method_wallet": "Кошелёк: {price} (баланс {balance})",
        "method_yookassa": "Картой (ЮKassa): {price}",
        "method_cryptobot": "CryptoBot: {price}",
        "button_pay_link": "Оплатить",
        "invoice_sent": "Ваш счёт за «{plan}»: {price}.",
        "pay_by_link": "Заказ {order}: {plan}, {price}. Оплатите на странице, которую откроет кнопка; "
        "мы напишем, как только платёж придёт.",
        "notice_paid_from_wallet": "Списано {price} с кошелька за «{plan}». Доступ подключается: "
        "мы напишем, когда он будет готов.",
        "notice_payment_received": "Платёж получен: {price}. Доступ подключается: мы напишем, когда он будет готов.",
        "maintenance": "Магазин закрыт на техническое обслуживание. Сейчас ничего нельзя купить; попробуйте позже.",
        "insufficient_funds": "На кошельке недостаточно средств для этой покупки.",
        "gift_unavailable": "Подарочные карты сейчас нельзя купить. Попробуйте позже.",
        "purchase_refused": "Эту покупку сейчас нельзя оформить. Начните заново из меню.",
        "payment_unavailable": "Не удалось открыть страницу оплаты. Попробуйте через минуту.",
        "precheck_order_not_pending": "Этот заказ истёк или уже оплачен. Начните заново из меню.",
        "precheck_amount_mismatch": "Цена изменилась. Начните заново из меню, чтобы увидеть текущую цену.",
        "precheck_currency_mismatch": "Этот заказ оплачивается только в Telegram Stars (XTR), а не в {currency}. "
        "Начните заново из меню.",
        "precheck_maintenance_active": "Магазин закрыт на техническое обслуживание. Попробуйте позже.",
        # --- кошелёк и автопродление ---
        "button_wallet": "Кошелёк",
        "wallet_header": "Ваш кошелёк",
        "wallet_empty": "Кошелёк пуст.",
        "wallet_balance": "Баланс: {balance}",
        "wallet_history_header": "Последние операции:",
        "wallet_history_line": "{when} UTC  {amount}  {what}",
        "wallet_topup_prompt": "Пополните его кнопками ниже.",
        "wallet_topup_none": "Пополнение сейчас недоступно.",
        "button_topup": "Пополнить на {amount} ({method})",
        "topup_method_yookassa": "картой",
        "topup_method_cryptobot": "CryptoBot",
        "topup_by_link": "Пополнение {order}: {amount}. Оплатите на странице, которую откроет кнопка; "
        "мы напишем, как только деньги придут.",
        "ledger_topup": "пополнение",
        "ledger_purchase": "покупка",
        "ledger_renewal": "продление",
        "ledger_refund": "возврат",
        "ledger_expiration": "бонус сгорел",
        "ledger_bonus": "бонус",
        "ledger_proration_credit": "возврат за неиспользованное время",
        "button_auto_renew_on": "Автопродление {number}: вкл. (выключить)",
        "button_auto_renew_off": "Автопродление {number}: выкл. (включить)",
        "auto_renew_on": "Автопродление «{plan}» включено: кошелёк оплатит следующий период за день до конца текущего.",
        "auto_renew_off": "Автопродление «{plan}» выключено.",
        # --- Мои подписки и уведомления ---
        "subscription_detail": "{number}. {plan}: {phase}, до {ends} UTC; трафик {traffic}",
        "subscription_link": "   Ссылка: {link}",
        "phase_provisioning": "подключается",
        "phase_active": "активна",
        "phase_expiring": "активна, скоро закончится",
        "phase_grace": "в льготном периоде",
        "phase_expired": "истекла",
        "phase_paused": "приостановлена",
        "phase_failed": "не удалось подключить (мы уже разбираемся)",
        "button_qr": "QR-код {number}",
        "qr_caption": "Отсканируйте, чтобы добавить подписку в VPN-приложение:\n{link}",
        "link_unavailable": "Ссылку сейчас нельзя показать. Попробуйте через минуту.",
        "notice_access_renewed": "Подписка продлена: «{plan}» до {ends} UTC. Ссылка остаётся прежней.",
        "notice_access_ready": "Доступ готов: «{plan}» до {ends} UTC.\n"
        "Добавьте эту ссылку в VPN-приложение (или отсканируйте QR-код):\n{link}",
        "notice_order_refunded": "Заказ {orderId} возвращён: {price} вернутся тем же способом, которым вы платили. "
        "Это может занять несколько дней.",
        "notice_gift_revoked": "Подарочная подписка «{plan}» отозвана: подарившему вернули деньги. "
        "Доступ по ней отключён.",
        "notice_order_refunded_full": "Заказ {orderId} возвращён: {price} вернутся тем же способом, которым вы "
        "платили (это может занять несколько дней). Доступ по этому заказу отключён.",
        "notice_order_refunded_wallet": "Заказ {orderId} возвращён: {price} зачислены на ваш кошелёк.",
        "notice_order_refunded_wallet_full": "Заказ {orderId} возвращён: {price} зачислены на ваш кошелёк. "
        "Доступ по этому заказу отключён.",
        "notice_wallet_credited": "Кошелёк пополнен на {price}. Баланс: {balance}.",
        "notice_dunning": "С кошелька не удалось списать {price} за продление «{plan}». "
        "Пополните его до {ends} UTC, чтобы сохранить доступ.",
    },
}

# Support (bot/handlers/support.py, bot/support_push.py), and the customer notices of the lifecycle loop
# (bot/lifecycle.py), delivered by the customer-notice loop as `notice_<kind>`: their fields are the payload.
CATALOG["en"].update(
    {
        "button_support": "Support",
        "button_code": "Gift or code",
        "button_trial": "Free trial",
        "code_prompt": "Send the code of your gift card or access code. Send /cancel to stop.",
        "code_activated": "Code accepted: {plan}, until {ends} UTC. Your access is being set up; we will tell you "
        "when it is ready.",
        "code_not_found": "That code is not valid. Check it and send it again, or /cancel.",
        "code_expired": "That code has expired.",
        "code_revoked": "That code has been withdrawn by the shop.",
        "code_too_many": "Too many wrong codes. Please try again in ten minutes.",
        "code_used": "That code has been used up.",
        "code_already_activated": "You have activated this code already.",
        "activation_refused": "That can't be activated. Send /start for the menu.",
        "trial_activated": "Your free trial is on: {plan}, until {ends} UTC. Your access is being set up; we will "
        "tell you when it is ready.",
        "trial_none": "There is no free trial at the moment.",
        "trial_used": "You have had your free trial already.",
        "channel_required": "Purchases are open to members of our channel {channel}. Join it, then press Buy again.",
        "channel_required_unnamed": "Purchases are open to members of our channel. Join it, then press Buy again.",
        "support_prompt": "Write your question in one message (at most {limit} characters); a photo with a caption "
        "works too. Send /cancel to stop.",
        "support_received": "Thank you! Your message is in ticket #{ticket}. We will answer here.",
        "support_cancelled": "OK, no message for support.",
        "support_empty": "Please write a few words (or send a photo) for support.",
        "support_photos_off": "Photos can't be accepted right now. Please describe the problem in words.",
        "support_photo_too_large": "That photo is too large: at most {limit}, please.",
        "size_mb": "{size} MB",
        "size_kb": "{size} KB",
        "support_reply": "Support, ticket #{ticket}:\n\n{text}",
        "notice_expiring_3d": "Your {plan} access ends in 3 days, on {ends} UTC. To keep it, extend it from the menu "
        "(Buy → {plan} → Extend my subscription) or turn auto-renewal on in My subscriptions.",
        "notice_expiring_1d": "Your {plan} access ends tomorrow, on {ends} UTC. To keep it, extend it from the menu "
        "(Buy → {plan} → Extend my subscription).",
        "notice_expired": "Your {plan} access ended on {ends} UTC. Buy a new period from the menu to get it back.",
        "notice_trial_ending": "Your free trial ends tomorrow, on {ends} UTC. To keep your access, choose a plan "
        "under Buy in the menu.",
        "notice_trial_ended": "Your free trial ended on {ends} UTC. Choose a plan under Buy in the menu to get your "
        "access back.",
        "notice_renews_from_wallet": "Your {plan} subscription renews from your wallet before it ends on {ends} UTC: "
        "{price} (your balance is {balance}). There is nothing you need to do.",
        "notice_renewal_needs_topup": "Your {plan} subscription ends on {ends} UTC. Auto-renewal pays {price} from "
        "your wallet, but your balance is {balance}: top up your wallet from the menu (Wallet) to keep your access.",
        "notice_gift_code": "Your gift card for {plan}: {code}\nWhoever activates it (menu → Gift or code) before "
        "{ends} UTC gets {plan}. This code is shown only this once: keep this message.",
        "notice_goods_delivered": "Your {goodsName} (order {orderId}):\n{code}\nThis is shown only this once: keep "
        "this message.",
    }
)
CATALOG["ru"].update(
    {
        "button_support": "Поддержка",
        "button_code": "Подарок или код",
        "button_trial": "Пробный период",
        "code_prompt": "Отправьте код подарочной карты или код доступа. Отправьте /cancel, чтобы передумать.",
        "code_activated": "Код принят: «{plan}», до {ends} UTC. Доступ подключается; мы сообщим, когда он будет готов.",
        "code_not_found": "Этот код недействителен. Проверьте и отправьте ещё раз или /cancel.",
        "code_expired": "Срок действия кода истёк.",
        "code_revoked": "Этот код отозван магазином.",
        "code_too_many": "Слишком много неверных кодов. Попробуйте снова через десять минут.",
        "code_used": "Этот код уже использован.",
        "code_already_activated": "Вы уже активировали этот код.",
        "activation_refused": "Это нельзя активировать. Отправьте /start, чтобы открыть меню.",
        "trial_activated": "Пробный период включён: «{plan}», до {ends} UTC. Доступ подключается; мы сообщим, когда "
        "он будет готов.",
        "trial_none": "Сейчас пробного периода нет.",
        "trial_used": "Вы уже пользовались пробным периодом.",
        "channel_required": "Покупки доступны подписчикам нашего канала {channel}. Подпишитесь и нажмите «Купить» "
        "ещё раз.",
        "channel_required_unnamed": "Покупки доступны подписчикам нашего канала. Подпишитесь и нажмите «Купить» "
        "ещё раз.",
        "support_prompt": "Напишите вопрос одним сообщением (не больше {limit} символов); можно фото с подписью. "
        "Отправьте /cancel, чтобы передумать.",
        "support_received": "Спасибо! Ваше сообщение в обращении №{ticket}. Ответим здесь.",
        "support_cancelled": "Хорошо, сообщение в поддержку не отправлено.",
        "support_empty": "Напишите пару слов (или пришлите фото) для поддержки.",
        "support_photos_off": "Фото сейчас принять не получится. Опишите проблему словами.",
        "support_photo_too_large": "Фото слишком большое: не больше {limit}.",
        "size_mb": "{size} МБ",
        "size_kb": "{size} КБ",
        "support_reply": "Поддержка, обращение №{ticket}:\n\n{text}",
        "notice_expiring_3d": "Ваш доступ «{plan}» закончится через 3 дня, {ends} UTC. Чтобы сохранить его, продлите "
        "подписку в меню («Купить» → «{plan}» → «Продлить мою подписку») или включите автопродление в «Мои подписки».",
        "notice_expiring_1d": "Ваш доступ «{plan}» закончится завтра, {ends} UTC. Чтобы сохранить его, продлите "
        "подписку в меню («Купить» → «{plan}» → «Продлить мою подписку»).",
        "notice_trial_ending": "Пробный период закончится завтра, {ends} UTC. Чтобы сохранить доступ, выберите тариф "
        "в меню «Купить».",
        "notice_trial_ended": "Пробный период закончился {ends} UTC. Выберите тариф в меню «Купить», чтобы вернуть "
        "доступ.",
        "notice_renews_from_wallet": "Подписка «{plan}» продлится с кошелька до окончания, {ends} UTC: {price} "
        "(на балансе {balance}). Делать ничего не нужно.",
        "notice_renewal_needs_topup": "Подписка «{plan}» заканчивается {ends} UTC. Автопродление спишет {price} с "
        "кошелька, но на балансе {balance}: пополните кошелёк в меню («Кошелёк»), чтобы сохранить доступ.",
        "notice_expired": "Ваш доступ «{plan}» закончился {ends} UTC. Купите новый период в меню, чтобы вернуть его.",
        "notice_gift_code": "Ваша подарочная карта «{plan}»: {code}\nТот, кто активирует её (меню → «Подарок или "
        "код») до {ends} UTC, получит «{plan}». Код показан только сейчас: сохраните это сообщение.",
        "notice_goods_delivered": "Ваш товар «{goodsName}» (заказ {orderId}):\n{code}\nПоказан только сейчас: "
        "сохраните это сообщение.",
    }
)

# The names of the languages, each in itself, for the language menu.
LANGUAGE_NAMES = {"ru": "Русский", "en": "English"}

# Operator notices (SPEC 6): English, one forum topic per notice topic.
TOPIC_OF_KIND = {
    "order_paid": "payments",
    "stars_payment_unmatched": "payments",
    "refund_manual": "payments",
    "refund_failed": "payments",
    "refund_unmatched": "payments",
    "gift_code_undelivered": "payments",
    "goods_delivery_review": "payments",
    "goods_provider_balance": "payments",
    "fulfillment_failure": "fulfillment",
    "undeclared_work": "operations",
    "anomaly": "operations",
}
DEFAULT_TOPIC = "operations"
TOPIC_NAMES = {
    "payments": "Payments",
    "fulfillment": "Fulfillment",
    "operations": "Operations",
}
NOTICE_TEXTS = {
    "order_paid": "Order {orderId} paid; entitlement {entitlementId} created.",
    "stars_payment_unmatched": (
        "A Stars payment of {amountMinor} {currency} from Telegram user {telegramUserId} matched no order "
        "(charge {chargeId}): refund it or settle it by hand."
    ),
    "refund_manual": (
        "Refund {refundId} of order {orderId}: {amountMinor} {currency} paid at {provider}, which has no refund API."
        " Pay it back by hand."
    ),
    "refund_failed": (
        "Refund {refundId} of order {orderId} ({amountMinor} {currency} at {provider}) failed: {errorCode}."
        " Pay it back by hand or refund it to the wallet."
    ),
    "refund_unmatched": (
        "{provider} reports refund {providerRefundId} of payment {paymentId} ({amountMinor} {currency}, {status})"
        " that no refund of this shop made: check it in the provider's dashboard and record it by hand."
    ),
    "gift_code_undelivered": (
        "Gift card {giftCardId} bought by order {orderId} was issued, but its code could not be kept for the buyer"
        " (APP_DATA_ENCRYPTION_KEY is not set). Revoke the card and issue the buyer another."
    ),
    "goods_delivery_review": (
        "Goods delivery {deliveryId} of order {orderId} needs review ({failureClass}: {errorCode}): the provider"
        " may or may not have sold it. Check at the provider, then resolve it in Shop → Goods deliveries."
    ),
    "goods_provider_balance": (
        "The goods provider refused order {orderId} for its balance (delivery {deliveryId}): top the balance up;"
        " the delivery is retried with backoff."
    ),
    "fulfillment_failure": (
        "Fulfillment {operation} for entitlement {entitlementId} is {status}: {errorCode}. See System → Jobs."
    ),
    "anomaly": (
        "Anomaly: {rule} is {value} {unit} (alerts when {direction} {threshold} {unit}; window of {windowMinutes} min"
        " from {windowStart}). Thresholds: System → Anomalies."
    ),
    "undeclared_work": (
        "Jobs of {work} (the oldest: job {jobId}) have waited over 10 minutes and no running worker runs them:"
        " start a worker of the release and settings that declare it, or cancel them in System → Jobs."
    ),
}
NOTICE_FALLBACK = "{kind}: {details}"


class _Values(dict):
    def __missing__(self, key):
        return "?"


def language_of(code):
    """A catalog language for a Telegram language_code (or a stored choice)."""
    code = (code or "").lower()
    for language in LANGUAGES:
        if code == language or code.startswith(language + "-"):
            return language
    return DEFAULT_LANGUAGE


def money(amount_minor, currency):
    """An amount as a customer reads it: 199.00 RUB, 250 ⭐ (Telegram Stars)."""
    if currency == "XTR":
        return f"{amount_minor} ⭐"
    return f"{to_decimal_text(amount_minor, currency)} {currency}"


def duration(language, days):
    """A plan's length as a customer reads it: 1 day, 30 days; 1 день, 3 дня, 30 дней."""
    return text(language, f"duration_{plural_form(language, days)}", days=days)


def plural_form(language, count):
    """one / few / many: the form of a noun after `count`, by the language's rule (Russian's three
    forms; English has one and many)."""
    if language != "ru":
        return "one" if count == 1 else "many"
    if count % 10 == 1 and count % 100 != 11:
        return "one"
    if 2 <= count % 10 <= 4 and not 12 <= count % 100 <= 14:
        return "few"
    return "many"


def text(language, key, **values):
    template = CATALOG.get(language, {}).get(key) or CATALOG[DEFAULT_LANGUAGE][key]
    return template.format_map(_Values(values))


def notice_text(kind, payload):
    """An operator notice's message: its kind's sentence, or the kind and its fields."""
    template = NOTICE_TEXTS.get(kind)
    if template is not None:
        return template.format_map(_Values(payload))
    details = ", ".join(f"{key}={value}" for key, value in sorted(payload.items()))
    return NOTICE_FALLBACK.format(kind=kind, details=details or "-")
