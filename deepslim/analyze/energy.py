"""Energy per operation at 45 nm (M. Horowitz, "Computing's energy problem", ISSCC 2014), the table
used by Deep Compression (Han et al., ICLR 2016) and EIE (Han et al., ISCA 2016). Picojoules."""

FP32_MULT_PJ = 3.7
FP32_ADD_PJ = 0.9
FP32_MAC_PJ = FP32_MULT_PJ + FP32_ADD_PJ  # 4.6 pJ
SRAM_READ_32BIT_PJ = 5.0
DRAM_READ_32BIT_PJ = 640.0
