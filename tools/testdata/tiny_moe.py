"""A tiny mixture-of-experts language model with checkpoint-style module names, for the
collector test: model.layers.L.mlp.experts.E.{gate,up,down}_proj, a router (mlp.gate) that never
picks the last expert, and lm_head. build_fused() gives the same model with the experts of each
layer held as 3-D parameters in one module, as current transformers releases implement MoE
models (gate_up_proj [E, 2I, H], down_proj [E, H, I], forward(hidden_states, top_k_index,
top_k_weights))."""
import json
import os
import sys

import torch

HIDDEN, INTER, EXPERTS, TOP_K, LAYERS, VOCAB = 64, 32, 4, 2, 2, 97


class Expert(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = torch.nn.Linear(HIDDEN, INTER, bias=False)
        self.up_proj = torch.nn.Linear(HIDDEN, INTER, bias=False)
        self.down_proj = torch.nn.Linear(INTER, HIDDEN, bias=False)

    def forward(self, x):
        return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class MoE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(HIDDEN, EXPERTS, bias=False)
        self.experts = torch.nn.ModuleList(Expert() for _ in range(EXPERTS))

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, HIDDEN)
        logits = self.gate(x)
        logits[:, EXPERTS - 1] = float("-inf")  # the last expert is never routed to
        w, idx = logits.softmax(-1).topk(TOP_K, dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            rows, slot = (idx == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue  # never called: the hook sees no tokens
            out.index_add_(0, rows, expert(x[rows]) * w[rows, slot, None])
        return out.reshape(shape)


class FusedExperts(torch.nn.Module):
    """All experts of a layer as 3-D parameters, computed like transformers' eager experts loop."""

    def __init__(self, experts):
        super().__init__()
        self.num_experts = len(experts)
        self.gate_up_proj = torch.nn.Parameter(torch.stack(
            [torch.cat([e.gate_proj.weight, e.up_proj.weight]) for e in experts]).detach().clone())
        self.down_proj = torch.nn.Parameter(torch.stack([e.down_proj.weight for e in experts]).detach().clone())
        self.act_fn = torch.nn.functional.silu

    def forward(self, hidden_states, top_k_index, top_k_weights):
        out = torch.zeros_like(hidden_states)
        for e in range(self.num_experts):
            token_idx, pos = torch.where(top_k_index == e)
            if token_idx.numel() == 0:
                continue
            x = hidden_states[token_idx]
            gate, up = torch.nn.functional.linear(x, self.gate_up_proj[e]).chunk(2, dim=-1)
            h = torch.nn.functional.linear(self.act_fn(gate) * up, self.down_proj[e])
            out.index_add_(0, token_idx, h * top_k_weights[token_idx, pos, None])
        return out


class FusedMoE(torch.nn.Module):
    def __init__(self, moe):
        super().__init__()
        self.gate = moe.gate
        self.experts = FusedExperts(moe.experts)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, HIDDEN)
        logits = self.gate(x)
        logits[:, EXPERTS - 1] = float("-inf")
        w, idx = logits.softmax(-1).topk(TOP_K, dim=-1)
        return self.experts(x, idx, w).reshape(shape)


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = MoE()

    def forward(self, x):
        return x + self.mlp(x)


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(VOCAB, HIDDEN)
        self.layers = torch.nn.ModuleList(Layer() for _ in range(LAYERS))


class TinyMoE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Inner()
        self.lm_head = torch.nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids):
        x = self.model.embed_tokens(ids)
        # Channel scales with a log-normal spread, as real activations have.
        x = x * self.spread
        for layer in self.model.layers:
            x = layer(x)
        return self.lm_head(x)


def build():
    torch.manual_seed(1234)
    m = TinyMoE()
    m.spread = torch.exp(torch.randn(HIDDEN))
    return m


def build_fused():
    """build() with each layer's experts fused into one module of 3-D parameters."""
    m = build()
    for layer in m.model.layers:
        layer.mlp = FusedMoE(layer.mlp)
    return m


def save(out):
    """Writes the weights as an F32 safetensors checkpoint with a config.json."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import collect_calib
    import struct
    m = build()
    os.makedirs(out, exist_ok=True)
    ts = {}
    for name, p in m.state_dict().items():
        t = p.detach().to(torch.float32).contiguous()
        ts[name] = ("F32", list(t.shape), struct.pack("<%df" % t.numel(), *t.flatten().tolist()))
    collect_calib.write_safetensors(os.path.join(out, "model.safetensors"), ts, {"format": "pt"}, "manual")
    cfg = {"architectures": ["TinyMoEForCausalLM"], "model_type": "tiny_moe", "hidden_size": HIDDEN,
           "moe_intermediate_size": INTER, "n_routed_experts": EXPERTS, "num_experts_per_tok": TOP_K,
           "num_hidden_layers": LAYERS, "vocab_size": VOCAB}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


if __name__ == "__main__":
    save(sys.argv[1])
