"""A subscription link as a QR code PNG (segno: pure Python, no imaging library)."""

import io

import segno

SCALE = 8  # pixels per module: a 33-module code is about 330 px, sharp on a phone
BORDER = 4  # the quiet zone the QR standard asks for


def png(link):
    buffer = io.BytesIO()
    segno.make(link, error="m").save(buffer, kind="png", scale=SCALE, border=BORDER)
    return buffer.getvalue()
