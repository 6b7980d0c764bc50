"""`format_analysis`: the per-layer table printed by `deepslim analyze`."""

from __future__ import annotations

from deepslim.analyze.energy import DRAM_READ_32BIT_PJ, FP32_ADD_PJ, FP32_MAC_PJ, FP32_MULT_PJ, SRAM_READ_32BIT_PJ
from deepslim.analyze.stats import LayerStats, totals


def _kib(n: int) -> str:
    return f"{n / 1024:,.1f}"


def _uj(pj: float) -> str:
    return f"{pj / 1e6:,.3f}"


def format_analysis(stats: list[LayerStats]) -> str:
    """An aligned text table: one row per layer, a total row, memory lines and a legend."""
    header = ["layer", "op", "output", "params", "MACs", "weights KiB", "stored KiB", "act KiB", "live KiB", "energy uJ"]
    rows = [
        [s.name, s.op, "x".join(map(str, s.output_shape)), f"{s.params:,}", f"{s.macs:,}", _kib(s.weight_bytes),
         _kib(s.stored_bytes), _kib(s.activation_bytes), _kib(s.live_bytes), _uj(s.energy_pj)]
        for s in stats
    ]
    t = totals(stats)
    rows.append(["total", "", "", f"{t.params:,}", f"{t.macs:,}", _kib(t.weight_bytes), _kib(t.stored_bytes),
                 _kib(t.activation_bytes), _kib(t.peak_live_bytes), _uj(t.energy_pj)])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    left = {0, 1, 2}

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    rule = "  ".join("-" * w for w in widths)
    out = [line(header), rule, *(line(r) for r in rows[:-1]), rule, line(rows[-1]), ""]
    out.append(f"peak activation memory (liveness plan): {_kib(t.peak_live_bytes)} KiB, while {t.peak_layer!r} runs; "
               f"sum of all layer outputs: {_kib(t.activation_bytes)} KiB")
    if t.energy_pj:
        out.append(f"energy: {_uj(t.energy_compute_pj)} uJ arithmetic + {_uj(t.energy_dram_pj)} uJ weight fetches "
                   f"= {_uj(t.energy_pj)} uJ per inference")
    out += [
        "",
        "Legend (batch 1, float32):",
        "  MACs       multiply-accumulates: conv2d out_elems*(C/group)*kh*kw, conv_transpose2d in_elems*(O/group)*kh*kw,",
        "             dense rows*M*K; every other op 0",
        "  weights    parameters (weight + bias elements) stored dense float32, 4 bytes each",
        "  stored     the constants in their encoding (sparse relative indices incl. fillers, bit-packed codebook",
        "             indices + centroids), before Huffman coding and 64-byte alignment",
        "  act        the layer's output activation; live: activations held while the layer runs, each freed",
        "             after its last reader (no in-place reuse); the total row shows the peak",
        f"  energy     45 nm figures (Horowitz, ISSCC 2014), as in Deep Compression and EIE: fp32 mult {FP32_MULT_PJ} pJ"
        f" + add {FP32_ADD_PJ} pJ",
        f"             = {FP32_MAC_PJ:.1f} pJ per MAC; every weight read once per inference from DRAM at"
        f" {DRAM_READ_32BIT_PJ:.0f} pJ per 32-bit word",
        f"             (dense fp32). Activations are assumed on chip (SRAM read {SRAM_READ_32BIT_PJ:.0f} pJ, not"
        " counted); pooling, relu,",
        "             softmax and bias adds are not counted.",
    ]
    return "\n".join(out)
