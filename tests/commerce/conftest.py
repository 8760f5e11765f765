"""Commerce tests that take money through the fake providers use the shop (tests/support/shop.py)."""

from tests.support.shop import shop, shop_fakes  # noqa: F401  (fixtures)
