#!/usr/bin/python3
"""Writes soap_golden.json: SOAP steps computed with PyTorch (Debian's python3-torch, run as /usr/bin/python3) for
tests/optim/soap_test.cpp to compare against.

The step below is written from the description of Emerging-Optimizers' SOAP (emerging_optimizers/legacy_soap/soap.py at
commit fd7729267109a8848709e9406bf19e53e970c3f4, registered as "soap"), with the arguments Megatron passes it
(docs/optim.md, "SOAP"): Kronecker factors with shampoo_beta's bias correction (KL-Shampoo or plain G G^T / G^T G),
exp_avg projected out of the old eigenbasis and into the new one (eigh on the first step, one round of orthogonal
iteration with QR afterwards, eigenvalues from diag(Q^T F Q), sorted descending), decoupled weight decay, Adam on the
projected gradient with bias correction, the direction projected back out, p -= lr * update.

Run from the repository root:  /usr/bin/python3 tests/optim/data/make_soap_golden.py
"""
import json
import os

import torch


def eigh_desc(f):
    w, q = torch.linalg.eigh(f)
    return torch.flip(w, [-1]), torch.flip(q, [-1])


def ortho_iter(f, q, steps=1):
    for _ in range(steps):
        q = torch.linalg.qr(f @ q).Q
    e = ((q.T @ f) * q.T).sum(dim=-1)
    idx = torch.argsort(e, descending=True)
    return e[idx], q[:, idx]


def soap_step(p, g, st, t, lr, wd, b1, b2, sb0, eps, kl):
    m, n = g.shape
    sb = 1 - (1 - sb0) / (1 - sb0 ** t)
    if kl:
        upd = []
        for idx, (q, e) in enumerate(((st["QL"], st["eL"]), (st["QR"], st["eR"]))):
            s = 1 / g.shape[idx] * e.clamp_min(eps) ** -1.0
            corr = (q * s[None, :]) @ q.T
            x = g.T if idx == 1 else g
            upd.append(x.T @ corr @ x)
        st["L"].lerp_(upd[1], 1 - sb)
        st["R"].lerp_(upd[0], 1 - sb)
    else:
        st["L"].lerp_(g @ g.T, 1 - sb)
        st["R"].lerp_(g.T @ g, 1 - sb)
    ea = st["QL"] @ st["ea"] @ st["QR"].T
    if t == 1:
        st["eL"], st["QL"] = eigh_desc(st["L"])
        st["eR"], st["QR"] = eigh_desc(st["R"])
    else:
        st["eL"], st["QL"] = ortho_iter(st["L"], st["QL"])
        st["eR"], st["QR"] = ortho_iter(st["R"], st["QR"])
    st["ea"] = st["QL"].T @ ea @ st["QR"]
    if wd != 0:
        p.add_(p, alpha=-wd * lr)
    gp = st["QL"].T @ g @ st["QR"]
    st["ea"].lerp_(gp, 1 - b1)
    st["eas"].lerp_(gp.square(), 1 - b2)
    u = (st["ea"] / (1 - b1 ** t)) / ((st["eas"] / (1 - b2 ** t)).sqrt() + eps)
    p.add_(st["QL"] @ u @ st["QR"].T, alpha=-lr)


def case(name, m, n, steps, kl, seed, lr=0.01, wd=0.1, b1=0.9, b2=0.95, sb=0.95, eps=1e-8, params=True):
    gen = torch.Generator().manual_seed(seed)
    p = torch.randn(m, n, generator=gen)
    grads = [torch.randn(m, n, generator=gen) for _ in range(steps)]
    p0 = p.clone()
    st = {"L": torch.zeros(m, m), "R": torch.zeros(n, n), "QL": torch.eye(m), "QR": torch.eye(n),
          "eL": torch.zeros(m), "eR": torch.zeros(n), "ea": torch.zeros(m, n), "eas": torch.zeros(m, n)}
    out = []
    for t in range(1, steps + 1):
        soap_step(p, grads[t - 1], st, t, lr, wd, b1, b2, sb, eps, kl)
        out.append({"param": p.flatten().tolist(), "eig_L": st["eL"].tolist(), "eig_R": st["eR"].tolist()})
    return {"name": name, "rows": m, "cols": n, "kl": kl, "lr": lr, "weight_decay": wd, "beta1": b1, "beta2": b2,
            "shampoo_beta": sb, "eps": eps, "params": params, "param0": p0.flatten().tolist(),
            "grads": [g.flatten().tolist() for g in grads], "steps": out}


def main():
    torch.set_num_threads(1)
    # The first step's projected gradient Q_L^T G Q_R is diagonal (the factors' eigenbases are G's singular vectors) up
    # to fp32 noise, and Adam turns noise above eps into +-1: with SOAP's eps (1e-8) the first update's off-diagonal
    # part depends on the last bits of the eigensolver, here and in Megatron alike. So the parameters are compared
    # with an eps far above that noise; the case with SOAP's eps compares the factors' eigenvalues only
    # ("params": false). A rectangular gradient leaves one factor singular after the first step, and eigh's basis of
    # its null space is arbitrary, which the next step's single round of orthogonal iteration carries on: rectangular
    # cases take one step, square (full-rank) ones several.
    cases = [
        case("square KL-Shampoo", 6, 6, 4, True, 1, eps=1e-2),
        case("square plain Shampoo", 7, 7, 4, False, 2, eps=1e-2),
        case("square KL-Shampoo, no weight decay", 5, 5, 3, True, 3, wd=0.0, eps=1e-2),
        case("square KL-Shampoo, SOAP's eps", 7, 7, 4, True, 4, params=False),
        case("wide plain Shampoo, one step", 5, 8, 1, False, 5, eps=1e-1),
        case("tall KL-Shampoo, one step", 9, 4, 1, True, 6, eps=1e-1),
    ]
    doc = {"source": "tests/optim/data/make_soap_golden.py with torch " + torch.__version__, "cases": cases}
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "soap_golden.json"), "w") as f:
        json.dump(doc, f, indent=None)
        f.write("\n")


if __name__ == "__main__":
    main()
