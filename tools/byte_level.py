"""GPT-2's byte-level BPE alphabet, shared by the fixture and golden scripts."""


def bytes_to_unicode() -> dict:
    """Byte -> printable character table, in GPT-2 order (printable bytes first, the rest mapped
    to U+0100 onward)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
          + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))
