// Pictures of a rank layout (layout_picture.h).
#include "parallel/layout_picture.h"

#include <algorithm>
#include <stdexcept>

#include "util/svg.h"

namespace mr::parallel {

namespace {

// For one kind of group: each rank's group index and its position in that group (-1, -1 when in none).
struct Membership {
  std::vector<int64_t> group, position;
};

Membership membership(const Layout& layout, const std::string& name) {
  const auto n = static_cast<size_t>(layout.spec.world_size);
  Membership m{std::vector<int64_t>(n, -1), std::vector<int64_t>(n, -1)};
  if (const GroupSet* s = layout.find(name))
    for (size_t g = 0; g < s->groups.size(); ++g)
      for (size_t i = 0; i < s->groups[g].size(); ++i) {
        const int r = s->groups[g][i];
        if (r >= 0 && static_cast<size_t>(r) < n) {
          m.group[r] = static_cast<int64_t>(g);
          m.position[r] = static_cast<int64_t>(i);
        }
      }
  return m;
}

std::string str(int64_t v) { return std::to_string(v); }

std::string sizes_line(const Layout& l) {
  std::string s = "TP=" + str(l.spec.tp) + " PP=" + str(l.spec.pp) + " CP=" + str(l.spec.cp) + " DP=" + str(l.dp);
  if (l.spec.ep > 1) s += " EP=" + str(l.spec.ep) + " expert TP=" + str(l.etp);
  return s + ", rank order " + l.spec.order();
}

std::string describe(const RankPlace& p, const Layout& l) {
  std::string s = "rank " + str(p.rank) + " (node " + str(p.node) + ", GPU " + str(p.local) + "): TP group " +
                  str(p.tp_group) + ", pipeline stage " + str(p.pp_stage) + " of " + str(l.spec.pp) +
                  ", data-parallel replica " + str(p.dp_replica) + " of " + str(l.dp);
  if (l.spec.cp > 1) s += ", context-parallel rank " + str(p.cp_rank) + " of " + str(l.spec.cp);
  if (p.ep_group >= 0) s += ", EP group " + str(p.ep_group);
  return s;
}

}  // namespace

std::vector<RankPlace> rank_places(const Layout& layout, int64_t gpus_per_node) {
  if (gpus_per_node < 1) throw std::invalid_argument("gpus per node must be at least 1");
  const Membership tp = membership(layout, "tp"), pp = membership(layout, "pp"), dp = membership(layout, "dp"),
                   cp = membership(layout, "cp"), ep = membership(layout, "ep");
  const bool experts = layout.spec.ep > 1;
  std::vector<RankPlace> out(static_cast<size_t>(layout.spec.world_size));
  for (size_t r = 0; r < out.size(); ++r) {
    RankPlace& p = out[r];
    p.rank = static_cast<int>(r);
    p.node = static_cast<int64_t>(r) / gpus_per_node;
    p.local = static_cast<int64_t>(r) % gpus_per_node;
    p.tp_group = tp.group[r];
    p.tp_rank = std::max<int64_t>(tp.position[r], 0);
    p.pp_stage = pp.position[r];
    p.dp_replica = dp.position[r];
    p.cp_rank = std::max<int64_t>(cp.position[r], 0);
    p.ep_group = experts ? ep.group[r] : -1;
  }
  return out;
}

std::string layout_svg(const Layout& layout, int64_t gpus_per_node, const std::string& title) {
  const std::vector<RankPlace> places = rank_places(layout, gpus_per_node);
  const int64_t world = layout.spec.world_size;
  const int64_t cols = std::min(gpus_per_node, world);
  const int64_t nodes = (world + gpus_per_node - 1) / gpus_per_node;
  const bool experts = layout.spec.ep > 1, context = layout.spec.cp > 1;

  // A cell: the rank, then one coloured stripe per kind of group.
  struct Stripe {
    const char* label;
    const char* meaning;
  };
  std::vector<Stripe> stripes = {{"TP", "tensor-parallel group (ranks that split each layer)"},
                                 {"PP", "pipeline stage (which layers the rank holds)"},
                                 {"DP", "data-parallel replica (which copy of the model)"}};
  if (context) stripes.push_back({"CP", "context-parallel rank (which part of the sequence)"});
  if (experts) stripes.push_back({"EP", "expert-parallel group (ranks that share the routed experts)"});
  const double cell_w = 92, stripe_h = 14, head_h = 18, gap = 6, left = 70, top = 58;
  const double cell_h = head_h + stripe_h * static_cast<double>(stripes.size()) + 4;
  const double grid_w = static_cast<double>(cols) * (cell_w + gap);
  const double legend_h = 22 + 16 * static_cast<double>(stripes.size() + 1) + 20;
  const double width = std::max(left + grid_w + 10, 560.0);
  const double height = top + static_cast<double>(nodes) * (cell_h + gap) + legend_h;

  svg::Document d(width, height, "megatron-run topology: " + title);
  d.text(10, 22, title, {.size = 15, .bold = true});
  d.text(10, 40, "world size " + str(world) + ", " + str(gpus_per_node) + " GPUs per node: " + sizes_line(layout),
         {.size = 12, .fill = "#444444"});
  for (int64_t n = 0; n < nodes; ++n) {
    const double y = top + static_cast<double>(n) * (cell_h + gap);
    d.text(10, y + cell_h / 2 + 4, "node " + str(n), {.size = 12, .bold = true});
  }
  for (int64_t c = 0; c < cols; ++c)
    d.text(left + static_cast<double>(c) * (cell_w + gap) + cell_w / 2, top - 4, "GPU " + str(c),
           {.size = 10, .anchor = svg::Anchor::Middle, .fill = "#666666"});

  for (const RankPlace& p : places) {
    const double x = left + static_cast<double>(p.local) * (cell_w + gap);
    const double y = top + static_cast<double>(p.node) * (cell_h + gap);
    d.begin_group(describe(p, layout));
    d.rect(x, y, cell_w, cell_h, "#f4f4f4", {}, "#888888", 1);
    d.text(x + cell_w / 2, y + 13, "rank " + str(p.rank), {.size = 11, .anchor = svg::Anchor::Middle, .bold = true});
    for (size_t s = 0; s < stripes.size(); ++s) {
      const std::string label = stripes[s].label;
      int64_t v = 0;
      std::string text;
      if (label == "TP") v = p.tp_group, text = "TP group " + str(v);
      if (label == "PP") v = p.pp_stage, text = "PP stage " + str(v);
      if (label == "DP") v = p.dp_replica, text = "DP replica " + str(v);
      if (label == "CP") v = p.cp_rank, text = "CP rank " + str(v);
      if (label == "EP") v = p.ep_group, text = "EP group " + str(v);
      // Each kind of group starts at its own place in the palette, so equal indices of different kinds differ.
      const std::string fill = svg::palette(static_cast<size_t>(std::max<int64_t>(v, 0)) + 3 * s);
      const double sy = y + head_h + stripe_h * static_cast<double>(s);
      d.rect(x + 3, sy, cell_w - 6, stripe_h - 1, fill);
      d.text(x + cell_w / 2, sy + stripe_h - 3.5, text,
             {.size = 9.5, .anchor = svg::Anchor::Middle, .fill = svg::text_colour_on(fill)});
    }
    d.end_group();
  }

  double ly = top + static_cast<double>(nodes) * (cell_h + gap) + 14;
  d.text(10, ly, "Each GPU shows, top to bottom:", {.size = 12, .bold = true});
  for (const Stripe& s : stripes) {
    ly += 16;
    d.text(24, ly, std::string(s.label) + ": " + s.meaning, {.size = 11, .fill = "#333333"});
  }
  d.text(24, ly + 16, "The same colour in the same stripe: the same group. Hover over a GPU for its details.",
         {.size = 11, .fill = "#333333"});
  return d.str();
}

namespace {
// Text inside a DOT string: quotes and backslashes escaped; entities as in XML (Graphviz reads &amp;, &lt;, &gt;
// and &quot;), except the apostrophe, whose &apos; Graphviz does not know (it would show the entity): kept as is.
std::string dot_text(const std::string& s) {
  std::string xml = svg::escape(s);
  for (size_t at = xml.find("&apos;"); at != std::string::npos; at = xml.find("&apos;", at + 1)) xml.replace(at, 6, "'");
  std::string out;
  for (char c : xml) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}
std::string dot_quote(const std::string& s) { return "\"" + dot_text(s) + "\""; }
}  // namespace

std::string layout_dot(const Layout& layout, int64_t gpus_per_node, const std::string& title) {
  const std::vector<RankPlace> places = rank_places(layout, gpus_per_node);
  const bool experts = layout.spec.ep > 1;
  std::string out = "graph topology {\n";
  out += "  graph [label=\"" + dot_text(title) + "\\n" + dot_text(sizes_line(layout)) + "\"" +
         ", labelloc=t, fontname=\"sans-serif\", rankdir=LR, newrank=true];\n";
  out += "  node [shape=box, style=\"filled,rounded\", fontname=\"sans-serif\", fontsize=10];\n";
  out += "  edge [penwidth=2];\n";
  int64_t node = -1;
  for (const RankPlace& p : places) {
    if (p.node != node) {
      if (node >= 0) out += "  }\n";
      node = p.node;
      out += "  subgraph cluster_node" + str(node) + " {\n    label=\"node " + str(node) +
             "\";\n    style=rounded;\n    color=\"#888888\";\n";
    }
    // Group indices say "group", positions in a group say what the position is (as the SVG's stripes do), and the
    // TP rank tells apart the members of one TP group, which share everything else.
    std::string label = "rank " + str(p.rank) + "\\nTP group " + str(p.tp_group) + ", TP rank " + str(p.tp_rank) +
                        "\\nPP stage " + str(p.pp_stage) + " · DP replica " + str(p.dp_replica);
    if (layout.spec.cp > 1) label += " · CP rank " + str(p.cp_rank);
    if (experts) label += " · EP group " + str(p.ep_group);
    const std::string fill = svg::palette(static_cast<size_t>(std::max<int64_t>(p.tp_group, 0)));
    out += "    r" + str(p.rank) + " [label=\"" + label + "\", fillcolor=\"" + fill + "\", fontcolor=\"" +
           svg::text_colour_on(fill) + "\", tooltip=" + dot_quote(describe(p, layout)) + "];\n";
  }
  if (node >= 0) out += "  }\n";
  auto chains = [&](const char* name, const std::string& attrs) {
    const GroupSet* s = layout.find(name);
    if (!s) return;
    for (size_t g = 0; g < s->groups.size(); ++g)
      for (size_t i = 1; i < s->groups[g].size(); ++i)
        out += "  r" + std::to_string(s->groups[g][i - 1]) + " -- r" + std::to_string(s->groups[g][i]) + " [" +
               attrs + (std::string(name) == "tp" ? ", color=\"" + svg::palette(g) + "\"" : "") + "];\n";
  };
  out += "  // tensor-parallel groups: solid edges in the group's colour\n";
  chains("tp", "constraint=false");
  out += "  // pipeline stages: dashed edges from each stage to the next\n";
  chains("pp", "style=dashed, color=\"#555555\", penwidth=1");
  return out + "}\n";
}

}  // namespace mr::parallel
