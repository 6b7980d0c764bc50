"""Post-training int8 accuracy and size on Fashion-MNIST (docs/quantization.md records the results).

    .venv/bin/python tests/quant/measure_accuracy.py lenet5 lenet300 [--methods minmax,kl] [--epochs N]
        [--activation-bits 8,16]

Loads (or trains, once, and caches) the fp32 checkpoint through deepslim.workflow.train_model,
converts it to the IR, calibrates on the first 500 training images and compares the float reference
executor with the integer reference executor on the 10,000 test images. Not a test: needs torch
and minutes of CPU. Single-threaded.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="+")
    p.add_argument("--methods", default="minmax,percentile,kl,mse")
    p.add_argument("--epochs", type=int, default=None, help="training epochs when no checkpoint is cached")
    p.add_argument("--calib", type=int, default=500)
    p.add_argument("--test", type=int, default=10000)
    p.add_argument("--weight-bits", type=int, default=8)
    p.add_argument("--activation-bits", default="8", help="comma-separated: 8 (u8), 16 (every conv/dense 16x8)")
    args = p.parse_args()

    import torch

    torch.set_num_threads(1)
    from deepslim.format import encode_dsm
    from deepslim.frontends.reference import run_graph
    from deepslim.frontends.torch import from_torch
    from deepslim.ir.passes import optimize
    from deepslim.quant import quantize_graph, run_quantized
    from deepslim.workflow import load_data, train_model

    splits = load_data(None)
    calib = splits["train"][0][: args.calib]
    tx, ty = splits["test"][0][: args.test], splits["test"][1][: args.test]
    for name in args.models:
        recipe = None
        try:
            from deepslim.compress.recipe import load as load_recipe
            from deepslim.workflow import recipe_for

            recipe = load_recipe(recipe_for(name))
        except (FileNotFoundError, ImportError):
            pass
        model, _, path = train_model(name, splits, recipe, epochs=args.epochs, progress=False)
        graph = optimize(from_torch(model.eval(), torch.zeros(1, *model.input_shape)))
        fp32_bytes = len(encode_dsm(graph)[0])
        with torch.no_grad():
            logits = torch.cat([model(torch.from_numpy(tx[i : i + 1000])) for i in range(0, len(tx), 1000)]).numpy()
        acc32 = float((logits.argmax(1) == ty).mean() * 100)
        ref32 = run_graph(graph, tx[:500])
        logits_w8 = np.concatenate([run_graph(float_with_i8_weights(graph), tx[i : i + 1000])
                                    for i in range(0, len(tx), 1000)])
        print(f"{name}: checkpoint {path}; fp32 {acc32:.2f}% (reference executor agrees: "
              f"{np.abs(ref32 - logits[:500]).max():.2e}); fp32 .dsm {fp32_bytes:,} bytes", flush=True)
        for method in args.methods.split(","):
            for bits in (int(b) for b in args.activation_bits.split(",")):
                t = time.time()
                q = quantize_graph(graph, calib=calib, method=method, weight_bits=args.weight_bits,
                                   activation_bits=bits)
                tq = time.time() - t
                y = run_quantized(q, tx, batch=500)
                acc = float((y.argmax(1) == ty).mean() * 100)
                size = len(encode_dsm(q)[0])
                print(f"  {method:<10} {'int8' if bits == 8 else 'int16 activations'} {acc:.2f}% ({acc - acc32:+.2f}), "
                      f".dsm {size:,} bytes ({size / fp32_bytes:.3f}x), quantize {tq:.1f} s, "
                      f"eval {time.time() - t - tq:.1f} s; logits: max |error| {np.abs(y - logits).max():.4f}, "
                      f"mean {np.abs(y - logits).mean():.5f} (against the same i8 weights in fp32: max "
                      f"{np.abs(y - logits_w8).max():.4f}, mean {np.abs(y - logits_w8).mean():.5f})", flush=True)


def float_with_i8_weights(graph):
    """The fp32 graph with each conv/dense weight replaced by its dequantized i8 value: what remains
    of the quantized model's error against it is the activations' (and biases')."""
    from deepslim.ir import Graph, Value
    from deepslim.quant.params import quantize_weights

    g = Graph(dict(graph.values), list(graph.nodes), list(graph.inputs), list(graph.outputs))
    for n in graph.nodes:
        if n.op in ("conv2d", "dense"):
            v = graph.values[n.inputs[1]]
            q, s = quantize_weights(v.data)
            w = q * s.reshape(-1, *[1] * (q.ndim - 1))
            g.values[v.name] = Value(v.name, v.shape, "f32", w.astype(np.float32))
    return g


if __name__ == "__main__":
    main()
