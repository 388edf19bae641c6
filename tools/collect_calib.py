#!/usr/bin/env python3
"""Collect calibration statistics for pdq (format: docs/CALIBRATION.md).

Registers forward hooks on the Linear modules of a model whose names match --targets (and wraps
the forward of fused expert modules, which hold all experts of a layer as 3-D parameters, to
see each expert's routed tokens), runs token sequences through it and writes, per module M
(names as in the checkpoint, NAME.E.gate_proj/up_proj/down_proj for fused experts):

  M.input_sq_mean   F32 [K]     E[x_j^2] over the tokens M saw
  M.input_abs_mean  F32 [K]     E[|x_j|]
  M.tokens          I64 [1]     tokens M saw (0: an expert the router never chose)
  M.hessian         F32 [K, K]  X^T X / n (only for modules matching --hessian)

and __metadata__ {"tokens": total tokens run, "source": free text, ...}. A routed expert's
hooks see only the tokens routed to it, so its statistics are per expert. Sums are kept on the
model's device in float64 (moments) and float32 or float64 (--hessian-dtype) (Hessians); memory
is bounded by the modules tracked, not by the number of tokens.

Gate and up projections of one expert read the same input: with --share-gate-up (default) only
gate_proj (w1) is written when its up_proj (w3) sibling is also a target; pdq looks an up
projection up under its gate sibling's name and vice versa.

Model: --model NAME_OR_DIR (Hugging Face transformers, AutoModelForCausalLM) or
--module FILE.py:FUNC (FUNC() returns a torch.nn.Module taking input_ids [B, L], or a
(module, tokenizer) pair). Data: --data FILE... where .txt/.jsonl (a "text" field per line) are
tokenized (needs a tokenizer) and .json (a list of token-id lists) or .tokens (whitespace
separated ids, one sequence per line) are used as they are.
"""
import argparse
import json
import os
import re
import struct
import sys

import torch

DEFAULT_TARGETS = r"\.experts\.\d+\.(gate_proj|up_proj|down_proj|w1|w2|w3)$"
SIBLINGS = (("gate_proj", "up_proj"), ("w1", "w3"))


class Collector:
    """Streaming per-module input statistics gathered by forward hooks.

    Two kinds of modules are tracked: torch.nn.Linear modules (a forward pre-hook sees their
    input), and fused expert modules that hold all experts of a layer as 3-D parameters
    (transformers' MixtralExperts, Qwen3MoeExperts, DeepseekV3NaiveMoe, ...: gate_up_proj
    [E, 2I, H] or gate_proj/up_proj [E, I, H], and down_proj [E, H, I], called as
    forward(hidden_states, top_k_index, top_k_weights)). For the latter the module's forward is
    wrapped: for each expert e, the tokens routed to it give the input of
    NAME.e.gate_proj/up_proj, and act(x·gateᵀ)·(x·upᵀ) that of NAME.e.down_proj, recorded under
    the checkpoint's per-expert names; the module's own forward then computes the output."""

    def __init__(self, model, targets=DEFAULT_TARGETS, hessian=None, hessian_dtype=torch.float32,
                 share_gate_up=True):
        self.stats = {}
        self.handles = []
        self.fused = []  # (module, its original instance forward or None)
        tre = re.compile(targets)
        self.hre = re.compile(hessian) if hessian else None
        self.hessian_dtype = hessian_dtype
        linear = {n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and tre.search(n)}
        fused = {}
        for n, m in model.named_modules():
            layout = fused_layout(m)
            if layout is None:
                continue
            names = {}
            for e in range(layout["experts"]):
                for proj in ("gate_proj", "up_proj", "down_proj"):
                    full = f"{n}.{e}.{proj}"
                    if tre.search(full):
                        names[(e, proj)] = full
            if names:
                fused[n] = (m, layout, names)
        names = linear | {full for _, _, nm in fused.values() for full in nm.values()}
        self.skipped = set()
        if share_gate_up:
            for n in names:
                parent, _, leaf = n.rpartition(".")
                for a, b in SIBLINGS:
                    if leaf == b and parent + "." + a in names:
                        self.skipped.add(n)
        for name, mod in model.named_modules():
            if name not in linear or name in self.skipped:
                continue
            st = self._new(name, mod.in_features, mod.weight.device)
            self.handles.append(mod.register_forward_pre_hook(self._hook(st)))
        for n, (mod, layout, nm) in fused.items():
            dev = layout["down"].device
            per = {}
            for (e, proj), full in nm.items():
                k = layout["inter"] if proj == "down_proj" else layout["hidden"]
                if full in self.skipped:
                    continue
                per[(e, proj)] = self._new(full, k, dev)
            if any(p == "down_proj" for _, p in per) and not hasattr(mod, "act_fn"):
                raise SystemExit(f"collect_calib: {n}: fused experts without act_fn: the down_proj inputs cannot be formed")
            self._wrap(mod, layout, per)

    def _new(self, name, k, dev):
        st = {"n": 0,
              "sq": torch.zeros(k, dtype=torch.float64, device=dev),
              "abs": torch.zeros(k, dtype=torch.float64, device=dev)}
        if self.hre is not None and self.hre.search(name):
            st["h"] = torch.zeros(k, k, dtype=self.hessian_dtype, device=dev)
        self.stats[name] = st
        return st

    @staticmethod
    def _hook(st):
        def hook(_mod, args):
            accumulate(st, args[0])
        return hook

    def _wrap(self, mod, layout, per):
        orig = mod.__dict__.get("forward")
        forward = mod.forward

        def wrapped(hidden_states, top_k_index, top_k_weights, *args, **kwargs):
            with torch.no_grad():
                x = hidden_states.reshape(-1, hidden_states.shape[-1])
                idx = top_k_index.reshape(x.shape[0], -1)
                for e in range(layout["experts"]):
                    gate, up, down = per.get((e, "gate_proj")), per.get((e, "up_proj")), per.get((e, "down_proj"))
                    if gate is None and up is None and down is None:
                        continue
                    tok = (idx == e).any(dim=-1).nonzero(as_tuple=True)[0]
                    if tok.numel() == 0:
                        continue
                    xe = x[tok]
                    for st in (gate, up):
                        if st is not None:
                            accumulate(st, xe)
                    if down is not None:
                        accumulate(down, expert_intermediate(mod, layout, e, xe))
            return forward(hidden_states, top_k_index, top_k_weights, *args, **kwargs)

        mod.forward = wrapped
        self.fused.append((mod, orig))

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []
        for mod, orig in self.fused:
            if orig is None:
                del mod.forward
            else:
                mod.forward = orig
        self.fused = []

    def tensors(self):
        """Returns {name: (dtype, shape, bytes)} of the statistics file."""
        out = {}
        for name, st in sorted(self.stats.items()):
            n = st["n"]
            k = st["sq"].shape[0]
            div = float(max(n, 1))
            sq = (st["sq"] / div).to(torch.float32).cpu()
            ab = (st["abs"] / div).to(torch.float32).cpu()
            out[name + ".input_sq_mean"] = ("F32", [k], _f32_bytes(sq))
            out[name + ".input_abs_mean"] = ("F32", [k], _f32_bytes(ab))
            out[name + ".tokens"] = ("I64", [1], struct.pack("<q", n))
            if "h" in st:
                h = st["h"].to(torch.float64) / div
                h = ((h + h.t()) / 2).to(torch.float32).cpu()
                out[name + ".hessian"] = ("F32", [k, k], _f32_bytes(h))
        return out


def accumulate(st, x):
    """Adds the rows of x (any shape [..., K]) to the statistics st."""
    x = x.detach()
    x = x.reshape(-1, x.shape[-1]).to(st["sq"].device)  # device_map may place inputs elsewhere
    if x.shape[0] == 0:
        return
    x64 = x.to(torch.float64)
    st["n"] += x.shape[0]
    st["sq"] += (x64 * x64).sum(0)
    st["abs"] += x64.abs().sum(0)
    if "h" in st:
        xh = x.to(st["h"].dtype)
        st["h"].addmm_(xh.t(), xh)


def fused_layout(m):
    """Describes a module holding all experts as 3-D parameters, or returns None: the experts
    count E, hidden size H, intermediate size I, and the gate/up/down weights as [E, out, in]
    views (a layout stored as [E, in, out], as some implementations do, is transposed; when both
    readings fit, the one transformers uses, [E, out, in], is taken)."""
    if isinstance(m, torch.nn.Linear):
        return None
    params = dict(m.named_parameters(recurse=False))
    down = params.get("down_proj")
    gate_up = params.get("gate_up_proj")
    gate, up = params.get("gate_proj"), params.get("up_proj")
    if down is None or down.dim() != 3 or (gate_up is None and (gate is None or up is None)):
        return None
    e = down.shape[0]
    if gate_up is not None:
        if gate_up.dim() != 3 or gate_up.shape[0] != e:
            return None
        if gate_up.shape[1] == 2 * down.shape[2] and gate_up.shape[2] == down.shape[1]:
            gu = gate_up  # [E, 2I, H]
        elif gate_up.shape[2] == 2 * down.shape[1] and gate_up.shape[1] == down.shape[2]:
            gu, down = gate_up.transpose(1, 2), down.transpose(1, 2)  # stored [E, H, 2I], [E, I, H]
        else:
            return None
        inter = gu.shape[1] // 2
        g, u = gu[:, :inter], gu[:, inter:]
    else:
        if gate.dim() != 3 or up.shape != gate.shape or gate.shape[0] != e:
            return None
        g, u = gate, up
        if g.shape[1:] != down.shape[1:][::-1]:
            return None
    return {"experts": e, "hidden": g.shape[2], "inter": g.shape[1], "gate": g, "up": u, "down": down,
            "gate_bias": _fused_bias(params, "gate_up_proj_bias", "gate_proj_bias", g.shape[1], True),
            "up_bias": _fused_bias(params, "gate_up_proj_bias", "up_proj_bias", g.shape[1], False)}


def _fused_bias(params, fused_name, name, inter, first):
    b = params.get(fused_name)
    if b is not None:
        return b[:, :inter] if first else b[:, inter:]
    return params.get(name)


def expert_intermediate(mod, layout, e, x):
    """act(x·gate_eᵀ + b)·(x·up_eᵀ + b): the input of expert e's down projection."""
    g = torch.nn.functional.linear(x, layout["gate"][e], None if layout["gate_bias"] is None else layout["gate_bias"][e])
    u = torch.nn.functional.linear(x, layout["up"][e], None if layout["up_bias"] is None else layout["up_bias"][e])
    return mod.act_fn(g) * u


def _f32_bytes(t):
    t = t.contiguous().to(torch.float32)
    if sys.byteorder != "little":
        raise RuntimeError("big-endian hosts are not supported")
    try:
        return t.numpy().tobytes()
    except Exception:  # torch without numpy
        return struct.pack("<%df" % t.numel(), *t.flatten().tolist())


def write_safetensors(path, tensors, metadata, writer="auto"):
    """Writes {name: (dtype, shape, bytes)} and a string metadata map to path (temp name, then
    rename). writer: "auto" uses the safetensors package when importable, "manual" the format by
    hand (8-byte little-endian header length, JSON header, data)."""
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)), "." + os.path.basename(path) + ".partial")
    if writer == "auto":
        try:
            import numpy as np
            from safetensors.numpy import save_file
        except ImportError:
            writer = "manual"
        else:
            np_dt = {"F32": np.float32, "I64": np.int64, "BF16": None}
            if all(np_dt.get(d) is not None for d, _, _ in tensors.values()):
                arrs = {n: np.frombuffer(b, dtype=np_dt[d]).reshape(s) for n, (d, s, b) in tensors.items()}
                save_file(arrs, tmp, metadata=metadata)
                os.replace(tmp, path)
                return
            writer = "manual"
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    off = 0
    order = sorted(tensors)
    for n in order:
        d, s, b = tensors[n]
        header[n] = {"dtype": d, "shape": list(s), "data_offsets": [off, off + len(b)]}
        off += len(b)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for n in order:
            f.write(tensors[n][2])
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_sequences(files, tokenizer, seq_len):
    """Yields lists of token ids, cut to seq_len."""
    for path in files:
        if path.endswith(".json"):
            with open(path) as f:
                seqs = json.load(f)
        elif path.endswith(".tokens"):
            with open(path) as f:
                seqs = [[int(t) for t in line.split()] for line in f if line.strip()]
        else:
            if tokenizer is None:
                raise SystemExit(f"collect_calib: {path}: text data needs a tokenizer (use --model, or token files)")
            with open(path) as f:
                if path.endswith(".jsonl"):
                    texts = [json.loads(line)["text"] for line in f if line.strip()]
                else:
                    texts = [f.read()]
            seqs = [tokenizer(t)["input_ids"] for t in texts]
        for s in seqs:
            for i in range(0, len(s), seq_len):
                chunk = s[i:i + seq_len]
                if chunk:
                    yield chunk


def load_model(args):
    tok = None
    if args.module:
        file, _, func = args.module.rpartition(":")
        import importlib.util
        spec = importlib.util.spec_from_file_location("calib_model", file)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        model = getattr(mod, func)()
        if isinstance(model, tuple):
            model, tok = model
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        dtype = getattr(torch, args.dtype)
        model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype, device_map=args.device_map,
                                                     trust_remote_code=args.trust_remote_code)
        tok = AutoTokenizer.from_pretrained(args.model, trust_remote_code=args.trust_remote_code)
    if args.device and not args.device_map:
        model = model.to(args.device)
    return model.eval(), tok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--model", help="Hugging Face model name or directory")
    g.add_argument("--module", help="FILE.py:FUNC returning a torch module (or (module, tokenizer))")
    ap.add_argument("--data", nargs="+", required=True, help="text (.txt, .jsonl) or token (.json, .tokens) files")
    ap.add_argument("--out", required=True, help="statistics file to write (.safetensors)")
    ap.add_argument("--targets", default=DEFAULT_TARGETS, help="regex over Linear module names (default: routed experts)")
    ap.add_argument("--hessian", default=None, help="regex: modules that also get a Hessian X^T X/n (K*K floats each)")
    ap.add_argument("--hessian-dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--no-share-gate-up", action="store_true", help="write up_proj/w3 even when gate_proj/w1 is written")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=0, help="stop after this many tokens (0: all)")
    ap.add_argument("--device", default=None, help="torch device for the model (cpu, cuda)")
    ap.add_argument("--device-map", default=None, help="transformers device_map (e.g. auto) for models larger than one device")
    ap.add_argument("--dtype", default="bfloat16", help="--model weights dtype")
    ap.add_argument("--trust-remote-code", action="store_true")
    ap.add_argument("--source", default="", help="free text recorded in the file (model, data set, date)")
    ap.add_argument("--writer", default="auto", choices=["auto", "manual"], help="manual: write the format without the safetensors package")
    args = ap.parse_args(argv)

    model, tok = load_model(args)
    col = Collector(model, args.targets, args.hessian, getattr(torch, args.hessian_dtype), not args.no_share_gate_up)
    if not col.stats:
        raise SystemExit(f"collect_calib: no Linear module or fused expert matches --targets {args.targets!r}")
    dev = args.device or next(model.parameters()).device
    total = 0
    batch = []

    def run(batch):
        n = max(len(s) for s in batch)
        ids = torch.zeros(len(batch), n, dtype=torch.long)
        for i, s in enumerate(batch):
            ids[i, :len(s)] = torch.tensor(s)
        with torch.no_grad():
            model(ids.to(dev))

    for seq in read_sequences(args.data, tok, args.seq_len):
        if args.max_tokens and total + len(seq) > args.max_tokens:
            seq = seq[:args.max_tokens - total]
        if not seq:
            break
        if args.batch_size > 1 and batch and len(seq) != len(batch[0]):
            run(batch)
            batch = []
        batch.append(seq)
        total += len(seq)
        if len(batch) == args.batch_size:
            run(batch)
            batch = []
        if args.max_tokens and total >= args.max_tokens:
            break
    if batch:
        run(batch)
    col.remove()
    meta = {"tokens": str(total), "source": args.source, "producer": "collect_calib.py",
            "targets": args.targets, "hessian": args.hessian or "",
            "shared_gate_up": "false" if args.no_share_gate_up else "true"}
    write_safetensors(args.out, col.tensors(), meta, args.writer)
    zero = sum(1 for s in col.stats.values() if s["n"] == 0)
    print(f"collect_calib: {total} tokens, {len(col.stats)} modules ({zero} saw no tokens) -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
