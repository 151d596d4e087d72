// SVG writer (svg.h).
#include "util/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "util/text.h"

namespace mr::svg {

std::string escape(std::string_view s) { return xml_escape(s, false); }  // newlines stay: a tooltip may have several lines

std::string num(double v) {
  if (!std::isfinite(v)) v = 0;
  char b[64];
  std::snprintf(b, sizeof b, "%.2f", v);
  std::string s = b;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

Document::Document(double width, double height, std::string title)
    : width_(width), height_(height), title_(std::move(title)) {}

void Document::rect(double x, double y, double w, double h, const std::string& fill, const std::string& tooltip,
                    const std::string& stroke, double stroke_width) {
  body_ += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(std::max(w, 0.0)) + "\" height=\"" +
           num(std::max(h, 0.0)) + "\" fill=\"" + escape(fill) + "\"";
  if (!stroke.empty()) body_ += " stroke=\"" + escape(stroke) + "\" stroke-width=\"" + num(stroke_width) + "\"";
  if (tooltip.empty()) {
    body_ += "/>\n";
  } else {
    body_ += "><title>" + escape(tooltip) + "</title></rect>\n";
  }
}

namespace {
std::string stroke_attrs(const LineStyle& s) {
  std::string a = " stroke=\"" + escape(s.stroke) + "\" stroke-width=\"" + num(s.width) + "\"";
  if (!s.dash.empty()) a += " stroke-dasharray=\"" + escape(s.dash) + "\"";
  return a;
}
}  // namespace

void Document::line(double x1, double y1, double x2, double y2, const LineStyle& style) {
  body_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) + "\"" +
           stroke_attrs(style) + "/>\n";
}

void Document::polyline(const std::vector<std::pair<double, double>>& points, const LineStyle& style) {
  if (points.empty()) return;
  body_ += "<polyline fill=\"none\" stroke-linejoin=\"round\"" + stroke_attrs(style) + " points=\"";
  for (size_t i = 0; i < points.size(); ++i)
    body_ += (i ? " " : "") + num(points[i].first) + "," + num(points[i].second);
  body_ += "\"/>\n";
}

void Document::text(double x, double y, std::string_view s, const TextStyle& st) {
  body_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + num(st.size) + "\" fill=\"" +
           escape(st.fill) + "\"";
  if (st.anchor == Anchor::Middle) body_ += " text-anchor=\"middle\"";
  if (st.anchor == Anchor::End) body_ += " text-anchor=\"end\"";
  if (st.bold) body_ += " font-weight=\"bold\"";
  if (st.rotate != 0) body_ += " transform=\"rotate(" + num(st.rotate) + " " + num(x) + " " + num(y) + ")\"";
  body_ += ">" + escape(s) + "</text>\n";
}

void Document::begin_group(const std::string& tooltip) {
  body_ += "<g>";
  if (!tooltip.empty()) body_ += "<title>" + escape(tooltip) + "</title>";
  body_ += "\n";
  ++open_groups_;
}

void Document::end_group() {
  if (open_groups_ == 0) return;
  body_ += "</g>\n";
  --open_groups_;
}

std::string Document::str() const {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                    num(width_) + "\" height=\"" + num(height_) + "\" viewBox=\"0 0 " + num(width_) + " " +
                    num(height_) + "\" font-family=\"sans-serif\">\n<title>" + escape(title_) + "</title>\n" +
                    "<rect x=\"0\" y=\"0\" width=\"" + num(width_) + "\" height=\"" + num(height_) +
                    "\" fill=\"#ffffff\"/>\n" + body_;
  for (int i = 0; i < open_groups_; ++i) out += "</g>\n";
  return out + "</svg>\n";
}

std::string palette(size_t i) {
  // Ten hues that stay apart for most readers, then the same hues lighter and darker.
  static const int base[10][3] = {{0x4e, 0x79, 0xa7}, {0xf2, 0x8e, 0x2b}, {0xe1, 0x57, 0x59}, {0x76, 0xb7, 0xb2},
                                  {0x59, 0xa1, 0x4f}, {0xed, 0xc9, 0x48}, {0xb0, 0x7a, 0xa1}, {0xff, 0x9d, 0xa7},
                                  {0x9c, 0x75, 0x5f}, {0xba, 0xb0, 0xac}};
  const int* c = base[i % 10];
  const size_t round = (i / 10) % 3;  // 0: as is, 1: lighter, 2: darker
  int rgb[3];
  for (int k = 0; k < 3; ++k)
    rgb[k] = round == 0 ? c[k] : round == 1 ? c[k] + (255 - c[k]) / 2 : c[k] * 3 / 5;
  char b[8];
  std::snprintf(b, sizeof b, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return b;
}

std::string text_colour_on(const std::string& fill) {
  unsigned r = 0, g = 0, b = 0;
  if (fill.size() != 7 || std::sscanf(fill.c_str(), "#%2x%2x%2x", &r, &g, &b) != 3) return "#000000";
  const double luma = 0.299 * r + 0.587 * g + 0.114 * b;
  return luma > 150 ? "#000000" : "#ffffff";
}

std::vector<double> nice_ticks(double lo, double hi, int count) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || count < 1) return {};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) return {lo};
  const double raw = (hi - lo) / count;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> out;
  const double first = std::ceil(lo / step - 1e-9) * step;
  for (int i = 0; i < 1000; ++i) {
    double v = first + i * step;
    if (v > hi + step * 1e-9) break;
    if (std::abs(v) < step * 1e-9) v = 0;
    out.push_back(v);
  }
  return out;
}

std::string tick_label(double v) {
  char b[64];
  const double a = std::abs(v);
  if (v == std::floor(v) && a < 1e15) {
    for (auto [div, suffix] : {std::pair{1e9, "G"}, std::pair{1e6, "M"}, std::pair{1e3, "k"}})
      if (a >= div && std::fmod(a, div / 10) == 0) {
        std::snprintf(b, sizeof b, "%g%s", v / div, suffix);
        return b;
      }
    std::snprintf(b, sizeof b, "%.0f", v);
    return b;
  }
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

}  // namespace mr::svg
