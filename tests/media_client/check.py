"""The official openai Python SDK through labrouter, for tests/media_client.rs.

Usage: check.py BASE_URL SCENARIO DIR. BASE_URL is labrouter's OpenAI base URL (…/v1);
SCENARIO one of generate, edit, transcribe, speech, rerank; DIR a directory for the files
sent and received. Prints one JSON object: what the SDK read. No retries: every request
the machines saw came from labrouter's chain, not from the SDK trying again.
"""

import base64
import json
import os
import struct
import sys
import zlib

import httpx
import openai

# The bytes of every file uploaded: NUL and 0xFF among them (tests/media_client.rs knows them).
FILE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def png_ok(png):
    """Whether png is a valid PNG: signature, every chunk's CRC, IDAT inflating to the
    rows IHDR promises."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        return False
    at, idat, ihdr = 8, b"", None
    while at < len(png):
        (n,) = struct.unpack(">I", png[at : at + 4])
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + n]
        (crc,) = struct.unpack(">I", png[at + 8 + n : at + 12 + n])
        if zlib.crc32(kind + data) & 0xFFFFFFFF != crc:
            return False
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", data)
        if kind == b"IDAT":
            idat += data
        at += 12 + n
    w, h, depth, colour = ihdr[:4]
    if (depth, colour) != (8, 2):
        return False
    return len(zlib.decompress(idat)) == h * (1 + 3 * w)


def wav_ok(wav):
    """Whether wav is a PCM WAV whose header's sizes match its length."""
    riff, size, wave = struct.unpack("<4sI4s", wav[:12])
    (data,) = struct.unpack("<I", wav[40:44])
    return (riff, wave, wav[36:40]) == (b"RIFF", b"WAVE", b"data") and size == len(wav) - 8 and data == len(wav) - 44


def write(path):
    with open(path, "wb") as f:
        f.write(FILE)
    return path


def images(data):
    pngs = [base64.b64decode(d.b64_json) for d in data]
    return {"count": len(pngs), "png_ok": all(png_ok(p) for p in pngs), "revised_prompt": data[0].revised_prompt}


def generate(client, base, d):
    r = client.images.generate(model="draw", prompt="a fox on a bench", n=2, response_format="b64_json")
    return images(r.data)


def edit(client, base, d):
    with open(write(os.path.join(d, "bench.png")), "rb") as f:
        r = client.images.edit(model="draw", image=f, prompt="add a hat", response_format="b64_json")
    return images(r.data)


def transcribe(client, base, d):
    with open(write(os.path.join(d, "memo.wav")), "rb") as f:
        r = client.audio.transcriptions.create(model="listen", file=f)
    return {"text": r.text}


def speech(client, base, d):
    path = os.path.join(d, "hello.wav")
    with client.audio.speech.with_streaming_response.create(
        model="speak", voice="alloy", input="hello lab", response_format="wav"
    ) as r:
        content_type = r.headers.get("content-type")
        r.stream_to_file(path)
    with open(path, "rb") as f:
        wav = f.read()
    return {"content_type": content_type, "bytes": len(wav), "wav_ok": wav_ok(wav)}


def rerank(client, base, d):
    docs = ["cats purr", "the fox jumps over the dog", "a brown fox"]
    body = {"model": "rank", "query": "brown fox", "documents": docs, "top_n": 2}
    r = httpx.post(base + "/rerank", json=body, timeout=30)
    v = r.json()
    return {"status": r.status_code, "model": v.get("model"), "results": v.get("results")}


def main():
    base, scenario, d = sys.argv[1], sys.argv[2], sys.argv[3]
    client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=30)
    scenarios = {"generate": generate, "edit": edit, "transcribe": transcribe, "speech": speech, "rerank": rerank}
    print(json.dumps(scenarios[scenario](client, base, d)))


if __name__ == "__main__":
    main()
