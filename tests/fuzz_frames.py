"""A coverage-guided fuzz target (atheris) for the frame decoder and param validation: the soak tier runs it.

    python tests/fuzz_frames.py -runs=200000          # or -max_total_time=600

Property: for any bytes, decoding a frame and validating its params either succeeds or raises a HivememError whose
code is a SPEC error code; any other exception is a crash that atheris reports with the input that caused it.
"""

from __future__ import annotations

import json
import re
import sys

try:
    import atheris
except ImportError:
    sys.exit("tests/fuzz_frames.py needs atheris: pip install -e '.[fuzz]'")

with atheris.instrument_imports():
    from hivemem.errors import HivememError
    from hivemem.manifest import BY_NAME
    from hivemem.params import validate
    from hivemem.protocol import decode_request, encode, reply

CODE = re.compile(r"^[a-z_]+\.[a-z_]+$")


VERB_NAMES = sorted(BY_NAME)


def structured(fdp: atheris.FuzzedDataProvider) -> bytes:
    """A request-shaped frame built from the input, so validation is reached as often as decoding."""
    verb = VERB_NAMES[fdp.ConsumeIntInRange(0, len(VERB_NAMES) - 1)]
    params: dict[str, object] = {}
    spec = BY_NAME[verb]
    for p in spec.params:
        kind = fdp.ConsumeIntInRange(0, 4)
        if kind == 1:
            params[p.name] = fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 80))
        elif kind == 2:
            params[p.name] = fdp.ConsumeInt(8)
        elif kind == 3:
            params[p.name] = [fdp.ConsumeUnicodeNoSurrogates(12) for _ in range(fdp.ConsumeIntInRange(0, 3))]
        elif kind == 4:
            params[p.name] = {"source": fdp.ConsumeUnicodeNoSurrogates(20)}
    request_id: object = fdp.ConsumeInt(8) if fdp.ConsumeBool() else fdp.ConsumeUnicodeNoSurrogates(70)
    return json.dumps({"id": request_id, "verb": verb, "params": params}).encode()


def one_input(data: bytes) -> None:
    frame = data if data[:1] == b"{" or len(data) < 2 else structured(atheris.FuzzedDataProvider(data))
    try:
        request_id, verb, params = decode_request(frame)
        spec = BY_NAME.get(verb)
        if spec is not None:
            validate(spec, params, 65536)
        encode(reply(request_id, ok={"echo": params}))
    except HivememError as exc:
        if not CODE.match(exc.code) or exc.code == "failed.internal":
            raise AssertionError(f"not a SPEC error: {exc.code}") from None
        encode(reply(None, error=exc))


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
