# numpy.matmul (float32) on the shapes of bench_gemm, for comparison with OpenBLAS sgemm. Run with
# env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 .venv/bin/python native/bench/bench_numpy_gemm.py
import time, numpy as np
shapes=[("square 256",256,256,256),("square 512",512,512,512),("square 1024",1024,1024,1024),
        ("conv M=64 K=576 N=3136",64,3136,576),("conv M=256 K=2304 N=196",256,196,2304),
        ("fc M=1000 K=1280 N=1",1000,1,1280),("fc M=1 K=1280 N=1000",1,1000,1280)]
rng=np.random.default_rng(0)
for name,m,n,k in shapes:
    a=rng.standard_normal((m,k),dtype=np.float32); b=rng.standard_normal((k,n),dtype=np.float32); c=np.empty((m,n),np.float32)
    np.matmul(a,b,out=c)
    ts=[]
    for r in range(7):
        calls=0; t0=time.perf_counter()
        while True:
            np.matmul(a,b,out=c); calls+=1
            el=time.perf_counter()-t0
            if el>=0.04: break
        ts.append(el/calls)
    ts.sort(); f=2*m*n*k
    print(f"{name:28s} median {ts[3]*1e3:8.3f} ms {f/ts[3]*1e-9:7.1f} GFLOP/s  best {f/ts[0]*1e-9:7.1f}")
