"""Export a BERT encoder for sequence classification (fine-tuning) as ONNX with PyTorch's
exporter, for bench/bench_poet_sweep.py (POET's headline workload). Needs torch and
transformers (a development environment, not MONET's); the weights are random (no download).

    python bench/make_bert.py OUT.onnx [--layers 12 --hidden 768 --heads 12 --seq 512 --batch 1 --classes 2]

The defaults are BERT-base at sequence length 512, the size POET's BERT graph has
(`BERTBase(SEQ_LEN=512, HIDDEN_DIM=768, HEADS=12, NUM_TRANSFORMER_BLOCKS=12)`).
"""

from __future__ import annotations

import argparse


def main() -> None:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--classes", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = BertConfig(num_hidden_layers=args.layers, hidden_size=args.hidden, num_attention_heads=args.heads,
                        intermediate_size=4 * args.hidden, max_position_embeddings=max(512, args.seq),
                        num_labels=args.classes, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForSequenceClassification(config).eval()
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq))

    class Logits(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids):
            return self.inner(input_ids=input_ids).logits

    torch.onnx.export(Logits(model), (ids,), args.out, input_names=["input_ids"], output_names=["logits"],
                      opset_version=17, dynamo=False)


if __name__ == "__main__":
    main()
