// A small SVG writer for megatron-run's pictures (`topology`, `schedule`, `params` with --format svg).
//
// The documents it writes are self-contained: no scripts, no external fonts, images or style sheets; text uses
// the generic `sans-serif` family, so any browser or viewer draws them the same way. Every text and attribute is
// escaped (XML's five characters, and control characters or bytes that are not UTF-8 through printable()).
//
//   svg::Document d(640, 400, "title shown by viewers");
//   d.rect(10, 10, 100, 20, "#4e79a7", "tooltip");
//   d.text(60, 24, "TP0", {.size = 11, .anchor = svg::Anchor::Middle, .fill = "#fff"});
//   std::string out = d.str();
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mr::svg {

// `s` as XML text or attribute content: & < > " ' as entities, and what printable() escapes (other control
// characters, bytes that are not UTF-8), which XML 1.0 would refuse, as the escape's visible text.
std::string escape(std::string_view s);

// A number as an SVG coordinate: at most two decimals, no trailing zeros ("12", "12.5", "-0.25").
std::string num(double v);

enum class Anchor { Start, Middle, End };

struct TextStyle {
  double size = 12;
  Anchor anchor = Anchor::Start;
  std::string fill = "#222222";
  bool bold = false;
  double rotate = 0;  // degrees, about the text's anchor point
};

struct LineStyle {
  std::string stroke = "#222222";
  double width = 1;
  std::string dash;  // stroke-dasharray, e.g. "4 3"; empty: solid
};

class Document {
 public:
  Document(double width, double height, std::string title);

  double width() const { return width_; }
  double height() const { return height_; }

  // A filled rectangle; `tooltip` becomes its <title> (viewers show it on hover). `stroke` empty: no outline.
  void rect(double x, double y, double w, double h, const std::string& fill, const std::string& tooltip = {},
            const std::string& stroke = {}, double stroke_width = 1);
  void line(double x1, double y1, double x2, double y2, const LineStyle& style = {});
  void polyline(const std::vector<std::pair<double, double>>& points, const LineStyle& style = {});
  void text(double x, double y, std::string_view s, const TextStyle& style = {});
  // A <g> with a <title>: what its children stand for. Groups nest; str() closes any left open.
  void begin_group(const std::string& tooltip = {});
  void end_group();

  // The whole document: the XML declaration, <svg> with width, height and viewBox, a white background.
  std::string str() const;

 private:
  double width_, height_;
  std::string title_;
  std::string body_;
  int open_groups_ = 0;
};

// A categorical colour for index i (ten distinct hues, then lighter and darker variants), as "#rrggbb".
std::string palette(size_t i);
// Black or white, whichever reads better on the colour "#rrggbb".
std::string text_colour_on(const std::string& fill);

// About `count` round tick values covering [lo, hi] (steps of 1, 2 or 5 times a power of ten).
std::vector<double> nice_ticks(double lo, double hi, int count = 5);
// A tick label: integers as integers (thousands with k/M/G suffixes when exact), else %g with 3 digits.
std::string tick_label(double v);

}  // namespace mr::svg
