"""Redis stream entry ids ("<ms>-<seq>") as comparable tuples, for the mirror and anyone reading a stream."""

type StreamId = tuple[int, int]


def parse_id(entry_id: str) -> StreamId:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def format_id(sid: StreamId) -> str:
    return f"{sid[0]}-{sid[1]}"
