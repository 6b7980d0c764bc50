import pytest
import torch

from deepslim import zoo
from deepslim.compress import RecipeError, compress, load_recipe
from deepslim.compress.kmeans import KMeansConfig
from deepslim.compress.prune import PruneConfig

GOOD = {
    "model": "lenet300",
    "train": {"epochs": 2, "lr": 0.001},
    "prune": {"sparsity": {"fc1": 0.9, "fc": 0.5}, "iterations": 2, "epochs_per_iteration": 1},
    "kmeans": {"bits": {"fc": 5}, "finetune_epochs": 1},
    "huffman": True,
    "index_bits": {"fc": 5},
}


def test_parses_into_ordered_steps(tmp_path):
    import yaml

    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    recipe = load_recipe(path)
    assert [name for name, _ in recipe.steps()] == ["prune", "kmeans"]
    assert isinstance(recipe.prune, PruneConfig) and recipe.prune.iterations == 2
    assert isinstance(recipe.kmeans, KMeansConfig) and recipe.kmeans.bits == {"fc": 5}
    assert recipe.index_bits == {"fc": 5} and recipe.model == "lenet300"
    recipe.check(zoo.get("lenet300"))


@pytest.mark.parametrize("path", ["deepslim/recipes/lenet300.yaml", "deepslim/recipes/lenet5.yaml"])
def test_shipped_recipes_are_valid(path):
    from pathlib import Path

    file = Path(__file__).parents[2] / path
    recipe = load_recipe(file)
    recipe.check(zoo.get(recipe.model))
    assert recipe.prune is not None and recipe.kmeans is not None and recipe.huffman


def with_change(section, key, value):
    d = {k: (dict(v) if isinstance(v, dict) else v) for k, v in GOOD.items()}
    if section is None:
        d[key] = value
    else:
        d[section][key] = value
    return d


@pytest.mark.parametrize(
    "section,key,value,message",
    [
        ("prune", "sparsity", {"fc1": 1.0}, r"prune.sparsity\['fc1'\] = 1.0: a sparsity must be a number in \[0, 1\)"),
        ("prune", "sparsity", {"fc1": -0.2}, r"\[0, 1\)"),
        ("prune", "sparsity", {"fc1": "high"}, r"\[0, 1\)"),
        ("prune", "iterations", 0, "prune.iterations"),
        ("prune", "epoch", 3, r"prune: unknown key\(s\) \['epoch'\]"),
        ("prune", "final_round", {"epoch": 3}, r"prune.final_round: unknown training option\(s\) \['epoch'\]"),
        ("kmeans", "bits", {"fc": 0}, r"kmeans.bits\['fc'\] = 0: bits must be an integer in 1..16"),
        ("kmeans", "bits", {"conv": 17}, "1..16"),
        (None, "index_bits", {"fc": 20}, r"index_bits\['fc'\] = 20"),
        (None, "huffman", "yes", "huffman must be true or false"),
        (None, "pruning", {}, r"unknown recipe key\(s\) \['pruning'\]"),
        (None, "train", {"epochs": 1, "optimiser": "sgd"}, "train: unknown training option"),
    ],
)
def test_validation_errors(section, key, value, message):
    with pytest.raises(RecipeError, match=message):
        load_recipe(with_change(section, key, value))


def test_unknown_layer_names_model_layers():
    recipe = load_recipe(with_change("prune", "sparsity", {"fc4": 0.5}))
    with pytest.raises(ValueError, match="prune.sparsity: unknown layer 'fc4'; this model's conv/fc layers are fc1, fc2, fc3"):
        recipe.check(zoo.get("lenet300"))
    recipe = load_recipe(with_change("kmeans", "bits", {"conv9": 4}))
    with pytest.raises(ValueError, match="kmeans.bits: unknown layer 'conv9'"):
        recipe.check(zoo.get("lenet5"))


def test_compress_without_training_data():
    torch.manual_seed(0)
    model = zoo.get("lenet5")
    recipe = load_recipe({"prune": {"sparsity": {"conv1": 0.3, "conv2": 0.8, "fc1": 0.95, "fc2": 0.8}},
                          "kmeans": {"bits": {"conv": 6, "fc": 4}}, "index_bits": "auto"})
    result = compress(model, recipe, progress=False)
    w = model.fc1.weight.detach().numpy()
    assert (w == 0).sum() == round(0.95 * w.size)
    assert len(set(w[w != 0].tolist())) <= 15
    enc = result.encodings["fc1.weight"]
    assert enc.layout == "sparse_rel" and set(w[w != 0].tolist()) <= set(enc.codebook.tolist())
    assert result.size.ratio > 20
    assert not any(n.endswith("weight_mask") for n, _ in model.named_buffers())
