#!/usr/bin/env python3
"""The `pictures_render` CTest test: megatron-run's pictures look right in a real browser and in Graphviz.

For each picture (topology SVG and DOT, schedule SVG, params SVG, each from a real corpus config) it:
  - checks the SVG is self-contained: well-formed XML, no <script>, no event handlers, no external references
    (href, url(...), @import, @font-face), only the generic sans-serif font;
  - renders it with headless Chromium (Debian's `chromium`) to a PNG of the size the SVG declares and checks the
    PNG: that size, not blank (many non-white pixels, several colours), the drawing spread over the page;
  - renders the DOT with Graphviz `dot` (to PNG and SVG) and checks the same of its PNG.
A missing `chromium` or `dot` fails the test (scripts/setup.sh installs both).

    usage: render.py MEGATRON_RUN [OUT_DIR] [--keep]
    render.py MEGATRON_RUN --write-docs   write the pictures into docs/pictures/ (scripts/gen-docs.sh)
    render.py MEGATRON_RUN --check-docs   fail unless docs/pictures/ holds what megatron-run draws now
    render.py --png FILE.png              print a PNG's size and what the checks measure (for a look by hand)
"""
import os, re, shutil, struct, subprocess, sys, tempfile, zlib
import xml.etree.ElementTree as ET

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CORPUS = os.path.join(ROOT, "tests", "data", "corpus", "functional-tests")
# The pictures of docs/ (scripts/gen-docs.sh writes them; docs_pictures_current checks they are current).
PICTURES = {
    "topology.svg": ["topology", "--world-size", "16", "--format", "svg",
                     "--config", "moe__gpt3_mcore_tp2_pp2_ep2_te_4experts2parallel.yaml"],
    "topology.dot": ["topology", "--world-size", "16", "--format", "dot",
                     "--config", "moe__gpt3_mcore_tp2_pp2_ep2_te_4experts2parallel.yaml"],
    "schedule.svg": ["schedule", "--world-size", "8", "--format", "svg", "--config", "gpt__gpt3_mcore_te_tp1_pp4_vp1_decoupled_lr.yaml",
                     "--train-iters", "400000"],
    "params.svg": ["params", "--world-size", "64", "--format", "svg", "--device-memory", "80GiB", "--vocab-size", "131072",
                   "--config", "gpt__gpt3_15b_8t_release_gb200.yaml"],
}


def command(megatron_run, name):
    args = list(PICTURES[name])
    i = args.index("--config")
    args[i + 1] = os.path.join(CORPUS, args[i + 1])
    return [megatron_run] + args + ["--env-placeholder", "/placeholder"]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


# ---- PNG ------------------------------------------------------------------------------------------------------

def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB/RGBA, non-interlaced PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path}: not a PNG")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, colour, _, _, interlace = ihdr
    if depth != 8 or colour not in (2, 6) or interlace:
        fail(f"{path}: unsupported PNG (depth {depth}, colour type {colour}, interlace {interlace})")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        ft = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if ft == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif ft == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 255
        elif ft == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif ft == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


def measure(path):
    w, h, rows = read_png(path)
    ink, colours = 0, set()
    x0, y0, x1, y1 = w, h, -1, -1
    for y, row in enumerate(rows):
        for x, px in enumerate(row):
            if px != (255, 255, 255):
                ink += 1
                colours.add(px)
                x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x), max(y1, y)
    return {"width": w, "height": h, "ink": ink / (w * h), "colours": len(colours),
            "spread": ((x1 - x0 + 1) / w if x1 >= 0 else 0, (y1 - y0 + 1) / h if y1 >= 0 else 0)}


def check_png(path, width=None, height=None):
    m = measure(path)
    if width is not None and (m["width"], m["height"]) != (width, height):
        fail(f"{path}: {m['width']}x{m['height']} pixels, expected {width}x{height}")
    if m["ink"] < 0.03 or m["colours"] < 4:
        fail(f"{path}: looks blank ({m['ink']:.1%} non-white pixels, {m['colours']} colours)")
    if min(m["spread"]) < 0.6:
        fail(f"{path}: the drawing covers only {m['spread'][0]:.0%} x {m['spread'][1]:.0%} of the page")
    return m


# ---- SVG ------------------------------------------------------------------------------------------------------

def check_svg(name, text):
    """The SVG's declared size, after checking it is self-contained."""
    try:
        root = ET.fromstring(text.encode())
    except ET.ParseError as e:
        fail(f"{name}: not well-formed XML: {e}")
    if root.tag != "{http://www.w3.org/2000/svg}svg":
        fail(f"{name}: the root is {root.tag}, not svg")
    for el in root.iter():
        tag = el.tag.split("}")[-1]
        if tag in ("script", "foreignObject", "image", "use", "style", "a"):
            fail(f"{name}: has a <{tag}> element")
        for k, v in el.attrib.items():
            k = k.split("}")[-1]
            if k.startswith("on") or k == "href" or "url(" in v:
                fail(f"{name}: <{tag} {k}=...> refers outside the document or runs code")
            if k == "font-family" and v != "sans-serif":
                fail(f"{name}: font-family {v!r} (only the generic sans-serif)")
    if re.search(r"@import|@font-face|https?://(?!www\.w3\.org/2000/svg)", text):
        fail(f"{name}: refers to something outside the document")
    if root.get("viewBox") != f"0 0 {root.get('width')} {root.get('height')}":
        fail(f"{name}: viewBox {root.get('viewBox')!r} does not match its size")
    return int(float(root.get("width"))), int(float(root.get("height")))


def chromium():
    for exe in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(exe):
            return exe
    fail("headless Chromium is needed (Debian: apt-get install chromium; scripts/setup.sh installs it)")


def render_svg(svg_path, png_path, w, h):
    # A fresh profile per run: no state shared with another browser or test.
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            "--no-first-run", "--user-data-dir=" + profile, "--screenshot=" + png_path,
                            f"--window-size={w},{h}", "file://" + svg_path],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    if r.returncode != 0 or not os.path.exists(png_path):
        fail(f"chromium could not render {svg_path}:\n{r.stdout.decode(errors='replace')[-2000:]}")


DOCS = os.path.join(ROOT, "docs", "pictures")


def docs(megatron_run, write):
    stale = []
    for name in PICTURES:
        r = subprocess.run(command(megatron_run, name), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if r.returncode != 0:
            fail(f"{name}: exited {r.returncode}:\n{r.stderr.decode()}")
        # Titles name a config by its file name only, so the output does not depend on where the checkout is.
        text = r.stdout.decode()
        path = os.path.join(DOCS, name)
        if write:
            os.makedirs(DOCS, exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        elif not os.path.exists(path) or open(path).read() != text:
            stale.append(name)
    if stale:
        print(f"FAIL: docs/pictures/{', '.join(stale)} differ from what megatron-run draws now: "
              "run scripts/gen-docs.sh")
        return 1
    print(f"docs/pictures: {len(PICTURES)} pictures {'written' if write else 'current'}")
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--png":
        print(measure(sys.argv[2]))
        return 0
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    megatron_run = sys.argv[1]
    if sys.argv[2:] in (["--write-docs"], ["--check-docs"]):
        return docs(megatron_run, write=sys.argv[2] == "--write-docs")
    keep = "--keep" in sys.argv
    rest = [a for a in sys.argv[2:] if a != "--keep"]
    out = rest[0] if rest else tempfile.mkdtemp(prefix="mr-pictures-")
    os.makedirs(out, exist_ok=True)
    if not shutil.which("dot"):
        fail("Graphviz `dot` is needed (Debian: apt-get install graphviz; scripts/setup.sh installs it)")
    for name in PICTURES:
        r = subprocess.run(command(megatron_run, name), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if r.returncode != 0:
            fail(f"{name}: {' '.join(command(megatron_run, name))} exited {r.returncode}:\n{r.stderr.decode()}")
        text = r.stdout.decode()
        path = os.path.join(out, name)
        with open(path, "w") as f:
            f.write(text)
        png = path + ".png"
        if name.endswith(".svg"):
            w, h = check_svg(name, text)
            render_svg(path, png, w, h)
            m = check_png(png, w, h)
        else:
            for fmt, dest in (("png", png), ("svg", path + ".svg")):
                d = subprocess.run(["dot", "-T" + fmt, path, "-o", dest], stderr=subprocess.PIPE, timeout=60)
                if d.returncode != 0 or d.stderr.strip():
                    fail(f"{name}: dot -T{fmt} failed or warned:\n{d.stderr.decode()}")
            m = check_png(png)
        print(f"{name}: {m['width']}x{m['height']} px, {m['ink']:.1%} ink, {m['colours']} colours, "
              f"spread {m['spread'][0]:.0%} x {m['spread'][1]:.0%}")
    if not keep and not rest:
        shutil.rmtree(out)
    print(f"pictures: {len(PICTURES)} rendered and checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
