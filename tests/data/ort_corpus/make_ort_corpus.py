"""Regenerate the ONNX Runtime training-graph corpus in this folder.

Run it in a development environment with torch, torchvision, transformers and
onnxruntime-training 1.19.2 (none of them is a MONET dependency). onnxruntime-training 1.19.2 is
published for CPython 3.11 and wants numpy < 2 and an onnx of its time; its Python package
imports torch, so the venv that holds it must also see torch:

    python3.11 -m venv /work/ortvenv
    /work/ortvenv/bin/pip install onnxruntime-training==1.19.2 "numpy<2" onnx==1.16.2
    # torch, torchvision, transformers from the export venv (see tests/data/corpus/export_corpus.py)
    echo /work/devvenv/lib/python3.11/site-packages > /work/ortvenv/lib/python3.11/site-packages/zz_dev.pth
    /work/ortvenv/bin/python tests/data/ort_corpus/make_ort_corpus.py [--only NAME,...]

Every architecture is built from a small configuration (random weights, nothing is downloaded),
put in training mode and exported *with its weights* by the TorchScript exporter (`dynamo=False`,
`training=TRAINING`, `do_constant_folding=False`, opsets 14..17), as ORT's on-device training
tutorials do; then `onnxruntime.training.artifacts.generate_artifacts` builds the training graph
(cross-entropy loss over the last axis of the model's output, every parameter trainable unless
the entry freezes some, buffers frozen) and the optimizer graph (AdamW, or SGD for some).

Kept here, stripped of their weights as tests/data/corpus is (every float initializer with more
than 64 elements keeps its name, dims and type and declares its data external in a
`<file>.weights.bin` that is not shipped):

- `<name>.training.onnx`: ORT's training_model.onnx (forward, loss, gradient graph, gradient
  accumulation);
- `<name>.forward.onnx`: the forward export generate_artifacts was given (MONET's own autodiff of
  it is what the training graph is compared with);
- `<name>.optimizer.onnx`: ORT's optimizer_model.onnx, for two architectures.

`manifest.json` lists the files (architecture, opset, inputs, trainable parameter count, the
gradient ops ORT wrote) and every architecture that failed to export or to build, with the
root cause.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import traceback
import warnings
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
# the forward corpus's script: inputs, the one-output wrapper and the weight stripping are the same
sys.path.insert(0, str(HERE.parent / "corpus"))
from export_corpus import FirstOutput, image, start_manifest, strip  # noqa: E402


def tokens(b: int = 2, s: int = 16, vocab: int = 100):
    import torch

    return (torch.randint(0, vocab, (b, s)),)


# ---------------------------------------------------------------------- the architectures


def architectures():
    """(name, make, inputs, opsets, options) for every architecture (the opsets are tried in
    order until ORT builds the training graph); options: `optimizer` (adamw
    or sgd), `frozen` (parameter name prefixes not trained), `optimizer_model` (keep ORT's
    optimizer graph too)."""
    import torch
    import torchvision.models as tv
    from torch import nn

    nc = 10
    yield "mlp", _mlp, (torch.randn(4, 32),), (17,), {"optimizer": "sgd", "optimizer_model": True}
    yield "cnn_bn", _cnn, image(2, 3, 16), (15,), {}
    yield "mobilenet_v2", lambda: tv.mobilenet_v2(num_classes=nc, width_mult=0.25,
                                                   inverted_residual_setting=[[1, 16, 1, 1], [6, 24, 2, 2],
                                                                              [6, 32, 1, 2]]), image(2, 3, 32), (17,), {}
    yield "mobilenet_v3_small", lambda: tv.mobilenet_v3_small(num_classes=nc, width_mult=0.25), \
        image(2, 3, 32), (16,), {}
    yield "efficientnet", _efficientnet, image(2, 3, 32), (17,), {"optimizer_model": True}
    yield "densenet", lambda: tv.densenet.DenseNet(growth_rate=4, block_config=(2, 2), num_init_features=8,
                                                   bn_size=2, num_classes=nc), image(2, 3, 32), (14,), {}
    yield "vit", lambda: tv.vision_transformer.VisionTransformer(
        image_size=16, patch_size=8, num_layers=1, num_heads=2, hidden_dim=32, mlp_dim=64, dropout=0.1,
        num_classes=nc), image(2, 3, 16), (17, 16), {}
    yield "bert", _bert, tokens(), (17, 15), {"frozen": ("inner.bert.embeddings.",)}
    yield "distilbert", _distilbert, tokens(), (16,), {}
    yield "gpt2_small", _gpt, tokens(), (17, 16), {"optimizer": "sgd"}
    yield "lstm_lm", lambda: _recurrent(nn.LSTM), tokens(2, 8), (17,), {}
    yield "gru_lm", lambda: _recurrent(nn.GRU), tokens(2, 8), (15,), {}
    yield "unet", _unet, image(2, 3, 16), (17,), {}
    yield "llama_style", _llama, tokens(), (17, 16), {}
    yield "t5_encoder", _t5_encoder, tokens(), (17, 16), {}
    yield "convnext", lambda: tv.convnext.ConvNeXt(
        [tv.convnext.CNBlockConfig(16, 32, 1), tv.convnext.CNBlockConfig(32, None, 1)], num_classes=nc), \
        image(2, 3, 16), (17, 16), {}
    yield "gn_unet", _gn_unet, image(2, 3, 16), (17,), {}
    yield "swin", lambda: tv.swin_transformer.SwinTransformer(
        patch_size=[2, 2], embed_dim=16, depths=[2], num_heads=[2], window_size=[4, 4], stochastic_depth_prob=0.0,
        num_classes=nc), image(2, 3, 16), (17, 16), {}
    yield "deit", _deit, image(2, 3, 16), (17, 16), {}


def _mlp():
    from torch import nn

    return nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Dropout(0.1), nn.Linear(64, 64), nn.Sigmoid(),
                         nn.Linear(64, 32), nn.LeakyReLU(0.1), nn.Linear(32, 10))


def _cnn():
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.AvgPool2d(2), nn.Flatten(), nn.Linear(16 * 2 * 2, 10))


def _efficientnet():
    from torchvision.models.efficientnet import EfficientNet, MBConvConfig

    settings = [MBConvConfig(1, 3, 1, 8, 8, 1), MBConvConfig(4, 3, 2, 8, 16, 1), MBConvConfig(4, 5, 2, 16, 24, 1)]
    return EfficientNet(settings, dropout=0.2, stochastic_depth_prob=0.0, last_channel=64, num_classes=10)


SMALL = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=100,
             max_position_embeddings=32)


def _bert():
    import transformers as hf

    config = hf.BertConfig(num_labels=4, **SMALL)
    config._attn_implementation = "eager"
    return FirstOutput(hf.BertForSequenceClassification(config))


def _distilbert():
    import transformers as hf

    config = hf.DistilBertConfig(dim=32, n_layers=1, n_heads=2, hidden_dim=64, vocab_size=100,
                                 max_position_embeddings=32, num_labels=4)
    config._attn_implementation = "eager"
    return FirstOutput(hf.DistilBertForSequenceClassification(config))


def _gpt():
    """A GPT-2 block stack in plain torch (transformers' GPT-2 does not export with the
    TorchScript exporter: its causal mask uses aten::diff): token and position embeddings,
    pre-LayerNorm blocks of causal multi-head attention (a registered lower-triangular mask) and
    a tanh-GELU MLP, dropout, a final LayerNorm and a language-model head."""
    import torch
    from torch import nn

    d, heads, layers, vocab, ctx = 32, 2, 2, 100, 16

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d),
                                     nn.Dropout(0.1))
            self.drop = nn.Dropout(0.1)
            self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / (d // heads) ** 0.5)
            att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
            att = self.drop(torch.softmax(att, dim=-1))
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            x = x + self.drop(self.c_proj(y))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.drop = nn.Dropout(0.1)
            self.h = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)

        def forward(self, ids):
            pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
            x = self.drop(self.wte(ids) + self.wpe(pos))
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    return GPT()


def _recurrent(cell):
    from torch import nn

    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(100, 16)
            self.rnn = cell(16, 24, num_layers=1, batch_first=True)
            self.head = nn.Linear(24, 100)

        def forward(self, ids):
            out, _ = self.rnn(self.embed(ids))
            return self.head(out)

    return Recurrent()


def _llama():
    """A Llama-style decoder layer in plain torch: RMSNorm, rotary position embeddings (halves
    rotated with a registered cos/sin table), causal attention, a SwiGLU MLP, an LM head."""
    import torch
    from torch import nn

    d, heads, vocab, ctx = 32, 2, 100, 16
    hd = d // heads

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

    def rotate(x, cos, sin):
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.norm1, self.norm2, self.norm = RMSNorm(), RMSNorm(), RMSNorm()
            self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
            self.gate, self.up = nn.Linear(d, 64, bias=False), nn.Linear(d, 64, bias=False)
            self.down = nn.Linear(64, d, bias=False)
            self.head = nn.Linear(d, vocab, bias=False)
            inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
            angles = torch.outer(torch.arange(ctx).float(), inv)
            angles = torch.cat([angles, angles], dim=-1)
            self.register_buffer("cos", angles.cos())
            self.register_buffer("sin", angles.sin())
            self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx))

        def forward(self, ids):
            b, t = ids.shape
            x = self.embed(ids)
            h = self.norm1(x)
            q, k, v = (z(h).view(b, t, heads, hd).transpose(1, 2) for z in (self.q, self.k, self.v))
            cos, sin = self.cos[:t], self.sin[:t]
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            att = (q @ k.transpose(-2, -1)) / hd ** 0.5
            att = torch.softmax(att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf")), dim=-1)
            x = x + self.o((att @ v).transpose(1, 2).reshape(b, t, d))
            h = self.norm2(x)
            x = x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))
            return self.head(self.norm(x))

    return Llama()


def _t5_encoder():
    import transformers as hf

    config = hf.T5Config(d_model=32, d_kv=16, d_ff=64, num_layers=1, num_heads=2, vocab_size=100)
    config._attn_implementation = "eager"
    return FirstOutput(hf.T5EncoderModel(config))


def _deit():
    import transformers as hf

    config = hf.DeiTConfig(image_size=16, patch_size=8, num_labels=10, hidden_size=32, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=64)
    config._attn_implementation = "eager"
    return FirstOutput(hf.DeiTForImageClassificationWithTeacher(config))


def _gn_unet():
    """GroupNorm, SiLU, residual blocks and nearest upsampling (a diffusion UNet's pieces),
    per-pixel classes channels-last as in `_unet`."""
    import torch
    from torch import nn

    class Res(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.n1, self.c1 = nn.GroupNorm(2, i), nn.Conv2d(i, o, 3, padding=1)
            self.n2, self.c2 = nn.GroupNorm(2, o), nn.Conv2d(o, o, 3, padding=1)
            self.skip = nn.Conv2d(i, o, 1) if i != o else nn.Identity()

        def forward(self, x):
            h = self.c1(nn.functional.silu(self.n1(x)))
            return self.skip(x) + self.c2(nn.functional.silu(self.n2(h)))

    class GNUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Conv2d(3, 8, 3, padding=1)
            self.down = Res(8, 16)
            self.up = Res(24, 8)
            self.out = nn.Conv2d(8, 5, 1)

        def forward(self, x):
            a = self.inp(x)
            b = self.down(nn.functional.avg_pool2d(a, 2))
            u = nn.functional.interpolate(b, scale_factor=2.0, mode="nearest")
            return self.out(self.up(torch.cat([u, a], dim=1))).permute(0, 2, 3, 1)

    return GNUNet()


def _unet():
    """A two-level UNet (batch norm, max pooling, ConvTranspose2d upsampling, skip
    concatenations); its per-pixel class scores are returned channels-last, (B, H, W, classes),
    since ORT's cross-entropy block takes the classes on the last axis."""
    import torch
    from torch import nn

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                             nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self, c=4, classes=5):
            super().__init__()
            self.down1, self.down2 = block(3, c), block(c, 2 * c)
            self.up1 = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
            self.dec1 = block(2 * c, c)
            self.out = nn.Conv2d(c, classes, 1)

        def forward(self, x):
            d1 = self.down1(x)
            d2 = self.down2(nn.functional.max_pool2d(d1, 2))
            u1 = self.dec1(torch.cat([self.up1(d2), d1], dim=1))
            return self.out(u1).permute(0, 2, 3, 1)

    return UNet()


# ---------------------------------------------------------------------- export, build, strip


def export_forward(make, inputs, opset: int):
    """The model (fresh, seeded, training mode) and its TorchScript export with weights."""
    import onnx
    import torch

    torch.manual_seed(0)
    model = make()
    model.train()
    buf = io.BytesIO()
    input_names = ["x"] if inputs[0].is_floating_point() else ["input_ids"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, buf, dynamo=False, opset_version=opset,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=input_names, output_names=["y"])
    return model, onnx.load_from_string(buf.getvalue()), input_names


def build(name: str, make, inputs, opset: int, options: dict, out_dir: Path) -> dict:
    import onnx
    from onnxruntime.training import artifacts

    model, proto, input_names = export_forward(make, inputs, opset)
    frozen_prefixes = tuple(options.get("frozen", ()))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad and not n.startswith(frozen_prefixes)}
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE}
    inits = [t.name for t in proto.graph.initializer if t.data_type in floats]
    requires_grad = [n for n in inits if n in trainable]
    frozen = [n for n in inits if n not in trainable]
    missing = sorted(trainable - set(inits))
    if missing:  # the exporter renamed a parameter; the entry would silently freeze it
        raise RuntimeError(f"parameters without an initializer of their name: {missing[:4]}")
    optimizer = artifacts.OptimType.SGD if options.get("optimizer") == "sgd" else artifacts.OptimType.AdamW
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        artifacts.generate_artifacts(proto, requires_grad=requires_grad, frozen_params=frozen,
                                     loss=artifacts.LossType.CrossEntropyLoss, optimizer=optimizer,
                                     artifact_directory=tmp)
        training = onnx.load(str(Path(tmp) / "training_model.onnx"))
        optim = onnx.load(str(Path(tmp) / "optimizer_model.onnx"))
    files = {}
    kept = [("forward", proto), ("training", training)] + ([("optimizer", optim)] if options.get("optimizer_model") else [])
    for kind, p in kept:
        stem = f"{name}.{kind}"
        strip(p, stem)
        for node in p.graph.node:
            node.doc_string = ""
        path = out_dir / f"{stem}.onnx"
        onnx.save_model(p, str(path), save_as_external_data=False)
        files[kind] = {"file": path.name, "nodes": len(p.graph.node), "bytes": path.stat().st_size}
    ms_ops = Counter(n.op_type for n in training.graph.node if n.domain == "com.microsoft")
    grad_std = Counter(n.op_type for n in training.graph.node if n.domain in ("", "ai.onnx") and "_Grad" in n.name)
    return {"architecture": name, "opset": opset, "optimizer": optimizer.name,
            "inputs": {n: list(i.shape) for n, i in zip(input_names, inputs)},
            "trainable_parameters": sum(p.numel() for n, p in model.named_parameters() if n in trainable),
            "files": files, "com.microsoft": dict(sorted(ms_ops.items())),
            "standard_ops_in_backward": dict(sorted(grad_std.items()))}


def short_reason(text: str) -> str:
    """The first line of an error, without the source location and C++ signature ORT's
    enforcement messages start with (`/onnxruntime_src/...cc:29 <signature> <condition> was
    false. <message>`)."""
    import re

    line = (text.strip().splitlines() or [""])[0]
    match = re.match(r"/onnxruntime_src/\S+:\d+ .*?\) (?:const )?(.*)$", line)
    return match.group(1) if match else line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated architecture names")
    parser.add_argument("--out", default=str(HERE))
    parser.add_argument("-v", action="store_true", help="print tracebacks of failures")
    args = parser.parse_args(argv)
    only, out_dir, manifest = start_manifest(args.only, args.out)
    for name, make, inputs, opsets, options in architectures():
        if only and name not in only:
            continue
        for opset in opsets:  # the first opset ORT builds a training graph for
            try:
                entry = build(name, make, inputs, opset, options, out_dir)
            except Exception as e:  # an exporter or ORT's gradient builder that cannot handle the model
                cause = e
                while cause.__cause__ is not None:
                    cause = cause.__cause__
                reason = f"{type(cause).__name__}: {short_reason(str(cause))}"[:300]
                manifest["failed"].append({"architecture": name, "opset": opset, "reason": reason})
                print(f"FAILED  {name} op{opset}: {reason}", flush=True)
                if args.v:
                    traceback.print_exc()
                continue
            manifest["models"].append(entry)
            sizes = ", ".join(f"{k} {v['bytes']} B" for k, v in entry["files"].items())
            print(f"ok      {name} op{opset}: {sizes}; {entry['com.microsoft']}", flush=True)
            break
    manifest["models"].sort(key=lambda m: m["architecture"])
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
