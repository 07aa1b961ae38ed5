#!/usr/bin/python3
"""Writes the hand-made vLLM response fixtures of `eldrsim trace import vllm` (tests/cli/trace_import_vllm.sh).

Six completion responses of models/deepseek-v2-lite.json (26 MoE layers, 64 experts, top-6), shaped
as a vLLM server started with --enable-return-routed-experts returns them, written twice:
  responses_lists.jsonl  arrays as nested JSON lists, arrival_s on each line
  responses_npy.jsonl    arrays as base64 strings of .npy files (int16, one int32, one format 2.0),
                         no arrival field: arrivals.csv gives them, joined by the response id
The two files hold the same requests and routing, so their imports must write the same trace. A third,
  responses_chat.jsonl   the same requests as vLLM's current server returns them (docs/trace-format.md
                         cites the source): chat completions whose choices[0].routed_experts is one
                         base64 .npy (uint8) of the whole sequence, prompt tokens then every generated
                         token but the last, with a row for each of the 27 decoder layers (the dense
                         first layer all zeros); no prompt_routed_experts; usage always present;
                         arrival_s added by the client
holds the same routing, so its import writes the same routing.bin. The ids are made up (seeded; a label prefers a few experts per layer), not captured from a model.
Lines are in completion order, not arrival order, as a client logs them. Rerun to regenerate:
  /usr/bin/python3 tests/data/vllm/make_fixtures.py
"""
import base64
import io
import json
import os

import numpy as np

LAYERS, EXPERTS, TOP_K = 26, 64, 6
HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(16)


def routing(tokens, preferred):
    """tokens x LAYERS x TOP_K distinct ids per (token, layer), leaning towards `preferred` experts."""
    out = np.empty((tokens, LAYERS, TOP_K), np.int16)
    w = np.ones(EXPERTS)
    w[preferred] = 6.0
    for t in range(tokens):
        for l in range(LAYERS):
            out[t, l] = rng.choice(EXPERTS, TOP_K, replace=False, p=w / w.sum())
    return out


def npy_b64(a, dtype, version=None):
    f = io.BytesIO()
    np.lib.format.write_array(f, a.astype(dtype), version=version)
    return base64.b64encode(f.getvalue()).decode()


# id, label, arrival (s), prompt tokens, generated tokens with routing, usage.completion_tokens
# (routed + 1: the last token is never fed through the model; or equal; or no usage at all).
REQUESTS = [
    ("cmpl-a1", "code", 0.40, 12, 7, 8),
    ("cmpl-a0", "code", 0.00, 30, 5, 6),
    ("cmpl-a3", "legal", 1.25, 9, 4, 4),
    ("cmpl-a2", "legal", 0.90, 21, 11, None),
    ("cmpl-a5", "code", 2.10, 6, 2, 3),
    ("cmpl-a4", "legal", 1.60, 17, 3, 4),
]
PREFERRED = {"code": [1, 5, 9, 33], "legal": [2, 40, 41, 63]}


def response(rid, label, prompt, gen, completion, encode, where):
    """A /v1/completions response; the routed-expert arrays at top level or in the choice."""
    choice = {"index": 0, "text": " ...", "logprobs": None, "finish_reason": "length", "stop_reason": None}
    r = {"id": rid, "object": "text_completion", "created": 1764547200, "model": "deepseek-ai/DeepSeek-V2-Lite",
         "choices": [choice]}
    target = r if where == "top" else choice
    target["prompt_routed_experts"] = encode(prompt, 0)
    target["routed_experts"] = encode(gen, 1)
    if completion is not None:
        r["usage"] = {"prompt_tokens": int(prompt.shape[0]), "total_tokens": int(prompt.shape[0]) + completion,
                      "completion_tokens": completion}
    r["label"] = label
    return r


def main():
    arrays = [(routing(p, PREFERRED[lab]), routing(g, PREFERRED[lab])) for _, lab, _, p, g, _ in REQUESTS]
    with open(os.path.join(HERE, "responses_lists.jsonl"), "w") as f:
        for i, ((rid, lab, t, _, _, comp), (pa, ga)) in enumerate(zip(REQUESTS, arrays)):
            r = response(rid, lab, pa, ga, comp, lambda a, _: a.tolist(), "top" if i % 2 else "choice")
            r["arrival_s"] = t
            f.write(json.dumps(r, separators=(",", ":")) + "\n")

    def encode_npy(i):
        # int16 as the server holds them; request 2 as int32, request 3 in .npy format 2.0.
        return lambda a, _: npy_b64(a, np.int32 if i == 2 else np.int16, (2, 0) if i == 3 else None)

    with open(os.path.join(HERE, "responses_npy.jsonl"), "w") as f:
        for i, ((rid, lab, _, _, _, comp), (pa, ga)) in enumerate(zip(REQUESTS, arrays)):
            r = response(rid, lab, pa, ga, comp, encode_npy(i), "choice" if i % 2 else "top")
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    with open(os.path.join(HERE, "responses_chat.jsonl"), "w") as f:
        for (rid, lab, t, p, g, _), (pa, ga) in zip(REQUESTS, arrays):
            seq = np.concatenate([pa, ga])  # prompt + generated tokens (g = completion_tokens - 1)
            full = np.zeros((seq.shape[0], LAYERS + 1, TOP_K), np.uint8)
            full[:, 1:, :] = seq  # decoder layer 0 is dense: no routing, left at zero
            choice = {"index": 0, "message": {"role": "assistant", "content": " ...", "reasoning": None},
                      "logprobs": None, "finish_reason": "length", "stop_reason": None, "token_ids": None,
                      "routed_experts": npy_b64(full, np.uint8)}
            r = {"id": "chat" + rid, "object": "chat.completion", "created": 1764547200,
                 "model": "deepseek-ai/DeepSeek-V2-Lite", "choices": [choice], "service_tier": None,
                 "system_fingerprint": None,
                 "usage": {"prompt_tokens": p, "total_tokens": p + g + 1, "completion_tokens": g + 1},
                 "prompt_logprobs": None, "prompt_token_ids": None, "kv_transfer_params": None,
                 "label": lab, "arrival_s": t}
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    with open(os.path.join(HERE, "arrivals.csv"), "w") as f:
        f.write("request_id,arrival_s\n")
        for rid, _, t, _, _, _ in sorted(REQUESTS, key=lambda r: r[0]):
            f.write(f"{rid},{t:.2f}\n")


if __name__ == "__main__":
    main()
