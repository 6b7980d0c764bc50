"""Deep Compression for PyTorch models: magnitude pruning, k-means weight sharing, Huffman coding.

    from deepslim.compress import compress, load_recipe
    result = compress(model, load_recipe("deepslim/recipes/lenet5.yaml"), train_data, val_data)
    result.model        # plain nn.Module: pruned weights are 0.0, the rest codebook values
    result.encodings    # {"conv1.weight": Encoding(...), ...} for the .dsm writer
    result.size.ratio   # fp32 bytes / estimated .dsm bytes of all parameters

`encodings()` and `size_report()` need numpy only; the training steps import torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deepslim.compress.encode import SizeReport, encodings, estimate_bytes, size_report
from deepslim.compress.recipe import Recipe, RecipeError
from deepslim.compress.recipe import load as load_recipe


@dataclass
class CompressedModel:
    model: Any  # torch.nn.Module with plain parameters
    encodings: dict[str, Any]  # parameter name -> deepslim.ir.Encoding
    size: SizeReport
    history: dict[str, Any] = field(default_factory=dict)
    quantize: Any = None  # deepslim.compress.qat.QuantizePlan when the recipe quantizes, else None


def compress(model, recipe: Recipe | dict | str, train_data=None, val_data=None, *, seed: int = 0,
             progress: bool = True) -> CompressedModel:
    """Run the recipe's steps on `model` in place (prune-retrain, then weight sharing + centroid
    training, then int8 quantization with optional sensitivity analysis and QAT) and encode the result.
    Without `train_data` the steps run with no retraining (quantization needs it for calibration)."""
    from deepslim.compress import kmeans, prune

    if not isinstance(recipe, Recipe):
        recipe = load_recipe(recipe)
    recipe.check(model)
    history: dict[str, Any] = {}
    plan = None
    for name, config in recipe.steps():
        if name == "prune":
            history["prune"] = prune.prune(model, config, train_data, val_data, progress=progress, seed=seed)
            prune.strip_masks(model)
        elif name == "kmeans":
            history["kmeans"] = kmeans.quantize(model, config, train_data, val_data, progress=progress, seed=seed)
        elif name == "quantize":
            from deepslim.compress import qat

            plan = qat.quantize(model, config, train_data, val_data, shared=recipe.kmeans is not None,
                                progress=progress, seed=seed)
            history["quantize"] = plan.history
    model.eval()
    shared_biases = recipe.kmeans is not None and recipe.kmeans.bias_bits > 0
    encs = encodings(model, recipe.index_bits, recipe.huffman, biases=shared_biases)
    return CompressedModel(model, encs, size_report(model, encs), history, plan)


__all__ = ["CompressedModel", "Recipe", "RecipeError", "SizeReport", "compress", "encodings",
           "estimate_bytes", "load_recipe", "size_report"]
