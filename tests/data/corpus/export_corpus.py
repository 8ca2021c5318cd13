"""Regenerate the weight-stripped export corpus in this folder.

Run it in a development environment that has torch, torchvision and transformers (they are not
dependencies of MONET):

    python3 -m venv /work/devvenv
    /work/devvenv/bin/pip install torch torchvision transformers onnxscript onnx
    /work/devvenv/bin/python tests/data/corpus/export_corpus.py [--only NAME,...]

Every architecture is built from a small configuration (random weights, nothing is downloaded),
put in training mode and exported twice: with the TorchScript exporter (`dynamo=False`,
`training=TRAINING`) and with the dynamo exporter, at opsets 13..18 (the TorchScript exports
cycle through 13..17, the dynamo exports use 18, which is what that exporter emits). Inputs are
small (batch 2, which training-mode batch norm needs, 32..64-pixel images, 16-token sequences) so that the corpus test stays fast.

The files are stripped as the bundled examples/models/*.onnx are: every float initializer with
more than 64 elements keeps its name, dims and data type, and its data is declared external
(`<file>.weights.bin`, which is not shipped); integer and small initializers keep their values
(shape arithmetic needs them). `manifest.json` lists every file (architecture, exporter, opset,
inputs; for the `sequence_models` family also PyTorch's forward matrix-product/convolution FLOPs
and trainable parameter count, which tests/unit/test_corpus.py compares with MONET's report) and
every export that failed, with the exporter's root cause.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import traceback
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
INLINE_LIMIT = 64  # initializers with at most this many elements keep their data


def image(b: int = 2, c: int = 3, hw: int = 32):
    import torch

    return (torch.randn(b, c, hw, hw),)


def tokens(b: int = 1, s: int = 16, vocab: int = 100):
    import torch

    return (torch.randint(0, vocab, (b, s)),)


class FirstOutput:
    """Wraps a transformers model so the export has one output (the logits or hidden states)."""

    def __new__(cls, model):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, *args):
                out = self.inner(*args)
                if isinstance(out, (tuple, list)):
                    return out[0]
                if isinstance(out, dict):  # torchvision's segmentation models: {"out": ...}
                    return next(iter(out.values()))
                return out.logits if hasattr(out, "logits") else out.last_hidden_state

        return Wrapped(model)


# ---------------------------------------------------------------------- the architectures


def torchvision_models():
    import torchvision.models as tv
    from torchvision.models import densenet, efficientnet, regnet, resnet, shufflenetv2, squeezenet, vgg
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    from torchvision.models.swin_transformer import SwinTransformer, SwinTransformerBlockV2, PatchMergingV2
    from torchvision.models.vision_transformer import VisionTransformer

    nc = 10
    yield "resnet18", lambda: tv.resnet18(num_classes=nc), image(2, 3, 32)
    yield "resnet_bottleneck", lambda: resnet.ResNet(resnet.Bottleneck, [1, 1, 1, 1], num_classes=nc), image(2, 3, 32)
    yield "resnext", lambda: resnet.ResNet(resnet.Bottleneck, [1, 1, 1, 1], groups=8, width_per_group=4,
                                           num_classes=nc), image(2, 3, 32)
    yield "wide_resnet", lambda: resnet.ResNet(resnet.Bottleneck, [1, 1, 1, 1], width_per_group=128,
                                               num_classes=nc), image(2, 3, 32)
    yield "mobilenet_v2", lambda: tv.mobilenet_v2(num_classes=nc, width_mult=0.5), image(2, 3, 32)
    yield "mobilenet_v3_small", lambda: tv.mobilenet_v3_small(num_classes=nc), image(2, 3, 32)
    yield "mobilenet_v3_large", lambda: tv.mobilenet_v3_large(num_classes=nc, width_mult=0.5), image(2, 3, 32)
    yield "efficientnet_b0", lambda: tv.efficientnet_b0(num_classes=nc), image(2, 3, 32)
    yield "efficientnet_v2", lambda: _efficientnet_v2(nc), image(2, 3, 32)
    yield "regnet_x", lambda: tv.regnet_x_400mf(num_classes=nc), image(2, 3, 32)
    yield "regnet_y", lambda: tv.regnet_y_400mf(num_classes=nc), image(2, 3, 32)
    yield "convnext", lambda: ConvNeXt([CNBlockConfig(32, 64, 1), CNBlockConfig(64, 128, 1), CNBlockConfig(128, None, 1)],
                                       num_classes=nc), image(2, 3, 32)
    yield "densenet", lambda: densenet.DenseNet(growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16,
                                                num_classes=nc), image(2, 3, 32)
    yield "shufflenet_v2", lambda: tv.shufflenet_v2_x0_5(num_classes=nc), image(2, 3, 32)
    yield "squeezenet1_0", lambda: tv.squeezenet1_0(num_classes=nc), image(2, 3, 64)
    yield "squeezenet1_1", lambda: tv.squeezenet1_1(num_classes=nc), image(2, 3, 64)
    yield "vgg11_bn", lambda: _small_vgg(nc), image(2, 3, 32)
    yield "alexnet", lambda: tv.alexnet(num_classes=nc), image(2, 3, 224)  # 6x6 features: the TS exporter
    # exports adaptive pooling only when the output divides the input
    yield "googlenet", lambda: tv.googlenet(num_classes=nc, aux_logits=False, init_weights=True), image(2, 3, 64)
    yield "mnasnet", lambda: tv.mnasnet0_5(num_classes=nc), image(2, 3, 32)
    yield "vit", lambda: VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=64,
                                           mlp_dim=128, num_classes=nc), image(2, 3, 32)
    yield "swin", lambda: SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                                          window_size=[4, 4], num_classes=nc), image(2, 3, 32)
    yield "swin_v2", lambda: SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                                             window_size=[4, 4], num_classes=nc, block=SwinTransformerBlockV2,
                                             downsample_layer=PatchMergingV2), image(2, 3, 32)
    yield "maxvit", lambda: tv.maxvit.MaxVit(input_size=(32, 32), stem_channels=16, partition_size=2,
                                             block_channels=[32, 64], block_layers=[1, 1], head_dim=16,
                                             stochastic_depth_prob=0.0, num_classes=nc), image(2, 3, 32)
    # segmentation and detection backbones
    yield "fcn_resnet", lambda: _fcn(nc), image(2, 3, 32)
    yield "lraspp_mobilenet_v3", lambda: tv.segmentation.lraspp_mobilenet_v3_large(
        num_classes=nc, weights=None, weights_backbone=None), image(2, 3, 64)
    yield "deeplabv3_mobilenet_v3", lambda: tv.segmentation.deeplabv3_mobilenet_v3_large(
        num_classes=nc, weights=None, weights_backbone=None, aux_loss=False), image(2, 3, 64)
    yield "fpn_resnet_backbone", lambda: _fpn_backbone(), image(2, 3, 64)
    del efficientnet, regnet, shufflenetv2, squeezenet, vgg


def _efficientnet_v2(nc):
    from torchvision.models.efficientnet import EfficientNet, FusedMBConvConfig, MBConvConfig

    settings = [
        FusedMBConvConfig(1, 3, 1, 16, 16, 1),
        FusedMBConvConfig(4, 3, 2, 16, 32, 1),
        MBConvConfig(4, 3, 2, 32, 64, 1),
        MBConvConfig(6, 3, 1, 64, 80, 1),
    ]
    return EfficientNet(settings, dropout=0.2, last_channel=256, num_classes=nc)


def _small_vgg(nc):
    import torch
    from torchvision.models.vgg import VGG, make_layers

    model = VGG(make_layers([16, "M", 32, "M", 64, 64, "M", 128, 128, "M"], batch_norm=True), num_classes=nc)
    model.avgpool = torch.nn.AdaptiveAvgPool2d((1, 1))
    model.classifier = torch.nn.Sequential(torch.nn.Linear(128, 64), torch.nn.ReLU(True), torch.nn.Dropout(),
                                           torch.nn.Linear(64, nc))
    return model


def _fcn(nc):
    from torchvision.models import resnet
    from torchvision.models._utils import IntermediateLayerGetter
    from torchvision.models.segmentation.fcn import FCN, FCNHead

    backbone = resnet.ResNet(resnet.Bottleneck, [1, 1, 1, 1], width_per_group=16,
                             replace_stride_with_dilation=[False, True, True])
    backbone = IntermediateLayerGetter(backbone, return_layers={"layer4": "out"})
    return FirstOutput(FCN(backbone, FCNHead(2048, nc)))


def _fpn_backbone():
    import torch
    from torchvision.models import resnet
    from torchvision.models.detection.backbone_utils import BackboneWithFPN

    body = resnet.ResNet(resnet.BasicBlock, [1, 1, 1, 1])
    fpn = BackboneWithFPN(body, {"layer2": "0", "layer3": "1", "layer4": "2"}, [128, 256, 512], 32)

    class Sum(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fpn = fpn

        def forward(self, x):
            feats = self.fpn(x)
            return feats["0"].mean(dim=(2, 3)) + feats["1"].mean(dim=(2, 3)) + feats["pool"].mean(dim=(2, 3))

    return Sum()


def transformers_models():
    import transformers as hf

    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                 vocab_size=100, max_position_embeddings=32)

    def build(config_class, model_class, **kw):
        def make():
            config = config_class(**kw)
            config._attn_implementation = "eager"
            return FirstOutput(model_class(config))

        return make

    yield "bert", build(hf.BertConfig, hf.BertForSequenceClassification, num_labels=4, **small), tokens()
    yield "gpt2", build(hf.GPT2Config, hf.GPT2LMHeadModel, n_embd=64, n_layer=2, n_head=2, vocab_size=100,
                        n_positions=32, use_cache=False), tokens()
    yield "distilbert", build(hf.DistilBertConfig, hf.DistilBertForSequenceClassification, dim=64, n_layers=2,
                              n_heads=2, hidden_dim=128, vocab_size=100, max_position_embeddings=32,
                              num_labels=4), tokens()
    yield "t5_encoder", build(hf.T5Config, hf.T5EncoderModel, d_model=64, d_kv=32, d_ff=128, num_layers=2,
                              num_heads=2, vocab_size=100), tokens()
    yield "roberta", build(hf.RobertaConfig, hf.RobertaForMaskedLM, **{**small, "max_position_embeddings": 40}), tokens()
    yield "albert", build(hf.AlbertConfig, hf.AlbertForSequenceClassification, embedding_size=32, num_labels=4,
                          **small), tokens()
    yield "electra", build(hf.ElectraConfig, hf.ElectraForSequenceClassification, embedding_size=32, num_labels=4,
                           **small), tokens()
    yield "hf_vit", build(hf.ViTConfig, hf.ViTForImageClassification, image_size=32, patch_size=8, num_labels=10,
                          hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128),\
        image(2, 3, 32)
    yield "hf_deit", build(hf.DeiTConfig, hf.DeiTForImageClassification, image_size=32, patch_size=8, num_labels=10,
                           hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128),\
        image(2, 3, 32)
    yield "hf_convnext", build(hf.ConvNextConfig, hf.ConvNextForImageClassification, hidden_sizes=[16, 32],
                               depths=[1, 1], num_stages=2, num_labels=10), image(2, 3, 32)
    yield "hf_mobilevit", build(hf.MobileViTConfig, hf.MobileViTForImageClassification, image_size=64,
                                hidden_sizes=[32, 48, 64], neck_hidden_sizes=[8, 16, 24, 32, 48, 64, 128],
                                num_labels=10), image(2, 3, 64)


class Named(tuple):
    """Example inputs with their graph input names (the default names are `x` for one float
    input and `input_ids` for one integer input)."""

    def __new__(cls, names, values):
        self = super().__new__(cls, values)
        self.names = list(names)
        return self


def waveform(b: int = 2, samples: int = 1600):
    import torch

    return (torch.randn(b, samples),)


def sequence_models():
    """Architectures the first corpus did not have: Llama-style decoders (RMSNorm, rotary
    embeddings, SwiGLU, causal mask, grouped-query attention), recurrent nets, UNets (transposed
    convolutions, GroupNorm, skip concatenations), conv1d audio encoders, encoder-decoders with
    cross-attention and a mixture of experts (which neither exporter exports today)."""
    import torch
    import transformers as hf

    def build(config_class, model_class, **kw):
        def make():
            config = config_class(**kw)
            config._attn_implementation = "eager"
            if hasattr(config, "num_local_experts"):
                config._experts_implementation = "eager"  # a loop over the experts, not grouped_mm
            return FirstOutput(model_class(config))

        return make

    decoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=128, vocab_size=100, max_position_embeddings=32, use_cache=False)
    yield "llama", build(hf.LlamaConfig, hf.LlamaForCausalLM, **decoder), tokens()
    yield "qwen2", build(hf.Qwen2Config, hf.Qwen2ForCausalLM, **decoder), tokens()
    yield "lstm", lambda: _recurrent(torch.nn.LSTM), tokens()
    yield "gru", lambda: _recurrent(torch.nn.GRU), tokens()
    yield "unet", lambda: _unet(), image(2, 3, 32)
    yield "wav2vec2", build(hf.Wav2Vec2Config, hf.Wav2Vec2Model, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=64, conv_dim=(32, 32, 32),
                            conv_stride=(5, 4, 4), conv_kernel=(10, 8, 8), num_conv_pos_embeddings=16,
                            num_conv_pos_embedding_groups=4, mask_time_prob=0.0), waveform(2, 1600)
    yield "t5", lambda: _seq2seq(build(hf.T5Config, hf.T5ForConditionalGeneration, d_model=64, d_kv=32, d_ff=128,
                                       num_layers=2, num_heads=2, vocab_size=100, use_cache=False)()), \
        Named(["input_ids", "decoder_input_ids"], tokens() + tokens(1, 8))
    yield "gn_unet", lambda: _gn_unet(), image(2, 3, 32)
    yield "whisper_encoder", lambda: _whisper_encoder(hf), (torch.randn(2, 16, 32),)
    yield "bart", lambda: _seq2seq(build(hf.BartConfig, hf.BartForConditionalGeneration, d_model=64, encoder_layers=2,
                                         decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
                                         encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=100,
                                         max_position_embeddings=32, use_cache=False)()), \
        Named(["input_ids", "decoder_input_ids"], tokens() + tokens(1, 8))
    yield "mixtral", build(hf.MixtralConfig, hf.MixtralForCausalLM, num_local_experts=4, num_experts_per_tok=2,
                           **decoder), tokens()


def _whisper_encoder(hf):
    """Whisper's audio encoder (two conv1d over 16 mel bins, 32 frames) alone."""
    import torch

    config = hf.WhisperConfig(d_model=64, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=128,
                              num_mel_bins=16, max_source_positions=16, decoder_layers=1, decoder_attention_heads=2,
                              decoder_ffn_dim=128, vocab_size=100, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                              decoder_start_token_id=0)
    config._attn_implementation = "eager"

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = hf.WhisperModel(config).encoder

        def forward(self, features):
            return self.encoder(features).last_hidden_state

    return Encoder()


def _gn_unet():
    """A diffusion-style UNet: residual blocks of GroupNorm, SiLU and convolutions, a strided
    convolution down, nearest upsampling and a skip concatenation up."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.n1, self.c1 = nn.GroupNorm(4, i), nn.Conv2d(i, o, 3, padding=1)
            self.n2, self.c2 = nn.GroupNorm(4, o), nn.Conv2d(o, o, 3, padding=1)
            self.skip = nn.Conv2d(i, o, 1)

        def forward(self, x):
            h = self.c1(nn.functional.silu(self.n1(x)))
            return self.skip(x) + self.c2(nn.functional.silu(self.n2(h)))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp, self.down_block = nn.Conv2d(3, 16, 3, padding=1), Block(16, 32)
            self.down, self.mid = nn.Conv2d(32, 32, 3, stride=2, padding=1), Block(32, 32)
            self.up, self.up_block = nn.Upsample(scale_factor=2, mode="nearest"), Block(64, 16)
            self.out = nn.Conv2d(16, 3, 3, padding=1)

        def forward(self, x):
            h = self.down_block(self.inp(x))
            m = self.mid(self.down(h))
            return self.out(self.up_block(torch.cat([self.up(m), h], 1)))

    return UNet()


def _seq2seq(wrapped):
    """Passes the decoder's tokens by name (the second positional argument is the attention mask)."""
    import torch

    class Seq2Seq(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = wrapped.inner

        def forward(self, input_ids, decoder_input_ids):
            return self.inner(input_ids=input_ids, decoder_input_ids=decoder_input_ids).logits

    return Seq2Seq()


def _recurrent(cell):
    import torch

    class Recurrent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(100, 32)
            self.rnn = cell(32, 48, num_layers=2, batch_first=True)
            self.head = torch.nn.Linear(48, 100)

        def forward(self, ids):
            out, _ = self.rnn(self.embed(ids))
            return self.head(out)

    return Recurrent()


def _unet():
    import torch
    from torch import nn

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                             nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self, c=8, classes=4):
            super().__init__()
            self.down1, self.down2, self.mid = block(3, c), block(c, 2 * c), block(2 * c, 4 * c)
            self.up2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2)
            self.dec2 = block(4 * c, 2 * c)
            self.up1 = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
            self.dec1 = block(2 * c, c)
            self.out = nn.Conv2d(c, classes, 1)

        def forward(self, x):
            d1 = self.down1(x)
            d2 = self.down2(nn.functional.max_pool2d(d1, 2))
            m = self.mid(nn.functional.max_pool2d(d2, 2))
            u2 = self.dec2(torch.cat([self.up2(m), d2], dim=1))
            u1 = self.dec1(torch.cat([self.up1(u2), d1], dim=1))
            return self.out(u1)

    return UNet()


# ---------------------------------------------------------------------- export and strip


def strip(model_proto, file_stem: str) -> None:
    """Declare the data of every large float initializer external (see the module docstring)."""
    from onnx import TensorProto, helper

    float_types = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE}
    offset = 0
    location = f"{file_stem}.weights.bin"
    for t in model_proto.graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        if t.data_type not in float_types or n <= INLINE_LIMIT:
            continue
        itemsize = helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        for field in ("raw_data", "float_data", "double_data", "int32_data"):
            t.ClearField(field)
        del t.external_data[:]
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", str(offset)), ("length", str(n * itemsize))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        offset += n * itemsize


def export(name: str, make, inputs, exporter: str, opset: int, out_dir: Path) -> dict:
    import onnx
    import torch

    torch.manual_seed(0)
    model = make()
    model.train()
    stem = f"{name}.{exporter}.op{opset}"
    buf = io.BytesIO()
    input_names = getattr(inputs, "names", None) or (["x"] if inputs[0].is_floating_point() else ["input_ids"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "ts":
            torch.onnx.export(model, inputs, buf, dynamo=False, opset_version=opset,
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                              input_names=input_names, output_names=["y"])
            proto = onnx.load_from_string(buf.getvalue())
        else:
            program = torch.onnx.export(model, tuple(inputs), dynamo=True, opset_version=opset,
                                        input_names=input_names, output_names=["y"], verbose=False)
            proto = program.model_proto
    strip(proto, stem)
    for node in proto.graph.node:  # the dynamo exporter's stack traces and module paths
        del node.metadata_props[:]
        node.doc_string = ""
    del proto.metadata_props[:]
    path = out_dir / f"{stem}.onnx"
    onnx.save_model(proto, str(path), save_as_external_data=False)
    return {"file": path.name, "architecture": name, "exporter": "torchscript" if exporter == "ts" else "dynamo",
            "opset": opset, "inputs": {n: list(i.shape) for n, i in zip(input_names, inputs)},
            "nodes": len(proto.graph.node), "bytes": path.stat().st_size}


def pytorch_figures(make, inputs) -> dict:
    """PyTorch's own count of the forward pass's matrix-product and convolution FLOPs
    (FlopCounterMode: 2 x multiply-adds) and of the trainable parameters, on a fresh instance
    in training mode (the exported instance is left untouched)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    model = make()
    model.train()
    with FlopCounterMode(display=False) as counter, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model(*tuple(inputs))
    return {"torch_forward_flops": int(counter.get_total_flops()),
            "torch_trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad)}


def start_manifest(only_text: str, out: str) -> tuple[set[str], Path, dict]:
    """The architectures asked for (`--only`, empty: all), the output folder (made) and the
    manifest to fill: the existing one without those architectures when only some are rebuilt."""
    only = set(filter(None, only_text.split(",")))
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = out_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if only and manifest_path.exists() else {"models": [], "failed": []}
    manifest["models"] = [m for m in manifest["models"] if m["architecture"] not in only]
    manifest["failed"] = [m for m in manifest["failed"] if m["architecture"] not in only]
    return only, out_dir, manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated architecture names")
    parser.add_argument("--out", default=str(HERE))
    args = parser.parse_args(argv)
    only, out_dir, manifest = start_manifest(args.only, args.out)
    ts_opsets = [13, 14, 15, 16, 17]
    index = 0
    for family in (torchvision_models, transformers_models, sequence_models):
        for name, make, inputs in family():
            index += 1
            if only and name not in only:
                continue
            figures = pytorch_figures(make, inputs) if family is sequence_models else {}
            for exporter, opset in (("ts", ts_opsets[index % len(ts_opsets)]), ("dynamo", 18)):
                try:
                    entry = {**export(name, make, inputs, exporter, opset, out_dir), **figures}
                    manifest["models"].append(entry)
                    print(f"ok      {entry['file']} ({entry['nodes']} nodes, {entry['bytes']} bytes)", flush=True)
                except Exception as e:  # an exporter that cannot export the model
                    while e.__cause__ is not None:  # the dynamo exporter wraps the cause in its step's error
                        e = e.__cause__
                    reason = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:300]
                    manifest["failed"].append({"architecture": name, "exporter": exporter, "opset": opset,
                                               "reason": reason})
                    print(f"FAILED  {name} {exporter} op{opset}: {reason}", flush=True)
                    if "-v" in sys.argv:
                        traceback.print_exc()
    manifest["models"].sort(key=lambda m: m["file"])
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
