"""A stand-in for a recorded real agent: replays the agent side of a corpus transcript.

usage: corpus_agent.py TRANSCRIPT RECEIVED

Goes through TRANSCRIPT (``tests/fixtures/corpus/*.jsonl``) in order: each run of
``agent->client`` lines is written to stdout in one write (newline-terminated), each
``client->agent`` line is awaited on stdin. Every line read is appended to RECEIVED
as it came (newline included), so the test can compare it with the recording.
After the transcript it reads stdin to its end and exits 0; it exits 1, saying so
on stderr, when stdin ends early.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    transcript, received = sys.argv[1], sys.argv[2]
    with open(transcript, encoding="utf-8") as f:
        records = [json.loads(x) for x in f if x.strip()]
    out = sys.stdout.buffer
    pending = bytearray()
    with open(received, "wb") as log:
        for record in records:
            if record["dir"] == "agent->client":
                pending += record["line"].encode("utf-8") + b"\n"
                continue
            if pending:
                out.write(pending)
                out.flush()
                pending.clear()
            line = sys.stdin.buffer.readline()
            log.write(line)
            log.flush()
            if not line:
                print("corpus_agent: stdin ended before the transcript did", file=sys.stderr)
                return 1
        if pending:
            out.write(pending)
            out.flush()
        for line in sys.stdin.buffer:
            log.write(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
