#include "config/print.h"

#include <algorithm>
#include <cctype>

#include "util/text.h"

namespace mr {

void print_megatron_table(std::ostream& os, const Namespace& ns, const std::string& title) {
  std::vector<std::string> lines;
  lines.reserve(ns.size());
  for (const auto& e : ns.entries()) {
    size_t dots = e.dest.size() < 48 ? 48 - e.dest.size() : 0;
    std::string line;
    line.reserve(64);
    // Megatron prints str(value) raw; unprintable characters in a value are escaped here (util/text.h).
    line.append("  ").append(e.dest).append(" ").append(dots, '.').append(" ").append(printable(e.value.py_str(), false));
    lines.push_back(std::move(line));
  }
  // Megatron sorts the formatted lines case-insensitively.
  auto less_ci = [](const std::string& a, const std::string& b) {
    size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
      int x = std::tolower(static_cast<unsigned char>(a[i])), y = std::tolower(static_cast<unsigned char>(b[i]));
      if (x != y) return x < y;
    }
    return a.size() < b.size();
  };
  std::stable_sort(lines.begin(), lines.end(), less_ci);
  std::string out = "------------------------ " + title + " ------------------------\n";
  for (const auto& l : lines) out.append(l).push_back('\n');
  out += "-------------------- end of " + title + " ---------------------\n";
  os << out;
}

std::string namespace_json(const Namespace& ns, bool with_provenance) {
  std::string out = "{";
  bool first = true;
  for (const auto& e : ns.entries()) {
    out += first ? "\n  " : ",\n  ";
    first = false;
    out += json_quote(e.dest) + ": ";
    if (with_provenance)
      out += "{\"value\": " + e.value.json() + ", \"source\": " + json_quote(e.prov.describe()) + "}";
    else
      out += e.value.json();
  }
  return out + "\n}";
}

std::string schema_json(const Schema& schema) {
  std::string out = "[";
  bool first = true;
  for (const Arg& a : schema.args()) {
    const ArgSpec& s = *a.spec;
    out += first ? "\n  {" : ",\n  {";
    first = false;
    out += "\"dest\": " + json_quote(s.dest);
    out += ", \"option_strings\": [";
    for (size_t i = 0; i < a.flags.size(); ++i) out += (i ? ", " : "") + json_quote(a.flags[i]);
    out += "]";
    out += std::string(", \"type\": ") + json_quote(to_string(s.type));
    out += std::string(", \"action\": ") + json_quote(to_string(s.action));
    out += ", \"default\": " + a.def.json();
    if (s.action == Action::StoreTrue || s.action == Action::StoreFalse || s.action == Action::StoreConst)
      out += ", \"const\": " + a.konst.json();
    out += ", \"choices\": ";
    if (a.choices.empty()) out += "null";
    else out += Value(a.choices).json();
    out += ", \"nargs\": ";
    if (a.nargs_kind == 0) out += "null";
    else if (a.nargs_kind == 'N') out += std::to_string(a.nargs_count);
    else out += json_quote(std::string(1, a.nargs_kind));
    out += ", \"metavar\": " + (*s.metavar ? json_quote(s.metavar) : std::string("null"));
    out += ", \"group\": " + json_quote(s.group);
    out += ", \"deprecated\": " + (*s.deprecated ? json_quote(s.deprecated) : std::string("null"));
    if (*s.env_default) out += ", \"env_default\": " + json_quote(s.env_default);
    // A member of one of Megatron's argparse mutually exclusive groups: the other members' dests.
    std::string others;
    for (const auto& group : mutually_exclusive_groups())
      if (std::find(group.begin(), group.end(), std::string_view(s.dest)) != group.end())
        for (std::string_view d : group)
          if (d != s.dest) others += (others.empty() ? "" : ", ") + json_quote(d);
    if (!others.empty()) out += ", \"mutually_exclusive_with\": [" + others + "]";
    out += ", \"help\": " + json_quote(s.help);
    out += "}";
  }
  return out + "\n]\n";
}

namespace {
std::string metavar_of(const Arg& a) {
  if (*a.spec->metavar) return a.spec->metavar;
  if (!a.choices.empty()) {
    std::string m = "{";
    for (size_t i = 0; i < a.choices.size(); ++i) m += (i ? "," : "") + a.choices[i].py_str();
    return m + "}";
  }
  std::string m = a.spec->dest;
  for (char& c : m) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return m;
}

void wrap(std::ostream& os, const std::string& text, size_t indent, size_t width) {
  size_t col = indent;
  std::string word;
  bool first = true;
  auto flush = [&] {
    if (word.empty()) return;
    if (!first && col + 1 + word.size() > width) {
      os << "\n" << std::string(indent, ' ');
      col = indent;
    } else if (!first) {
      os << ' ';
      ++col;
    }
    os << word;
    col += word.size();
    first = false;
    word.clear();
  };
  for (char c : text) {
    if (c == ' ') flush();
    else word += c;
  }
  flush();
}
}  // namespace

void print_help(std::ostream& os, const Schema& schema, const std::string& prog) {
  os << "usage: " << prog << " [--dry-run] [--config FILE]... [MEGATRON FLAGS...]\n"
     << "       " << prog << " COMMAND ...   (`" << prog << " help` lists the commands)\n\n"
     << "Megatron-LM arguments (" << schema.args().size() << "):\n";
  std::string group;
  for (const Arg& a : schema.args()) {
    if (group != a.spec->group) {
      group = a.spec->group;
      os << "\n" << group << ":\n";
    }
    std::string head = "  ";
    for (size_t i = 0; i < a.flags.size(); ++i) {
      head += (i ? ", " : "") + a.flags[i];
      if (a.takes_value()) {
        std::string mv = metavar_of(a);
        switch (a.nargs_kind) {
          case 0: head += " " + mv; break;
          case '?': head += " [" + mv + "]"; break;
          case '*': head += " [" + mv + " ...]"; break;
          case '+': head += " " + mv + " [" + mv + " ...]"; break;
          case 'N':
            for (int k = 0; k < a.nargs_count; ++k) head += " " + mv;
            break;
        }
      }
    }
    os << head;
    std::string help = a.spec->help;
    if (*a.spec->deprecated) help = "[deprecated: " + std::string(a.spec->deprecated) + "] " + help;
    if (a.takes_value() && !a.def.is_none()) help += " (default: " + a.def.py_str() + ")";
    if (head.size() >= 30) {
      os << "\n" << std::string(30, ' ');
    } else {
      os << std::string(30 - head.size(), ' ');
    }
    wrap(os, help, 30, 100);
    os << "\n";
  }
}

// ---- messages ----------------------------------------------------------------------------------------------

void print_error(std::ostream& os, std::string_view message) {
  os << "megatron-run: " + printable(rule_heading("error", message)) + "\n";
}

void print_warning(std::ostream& os, std::string_view message) {
  os << "megatron-run: " + printable(rule_heading("warning", message)) + "\n";
}

void print_internal_error(std::ostream& os, std::string_view message) {
  os << "megatron-run: internal error: " + printable(message) + "\n";
}

void print_diagnostic(std::ostream& os, const Diagnostic& d) {
  // The config file's line of the value involved, as `check` prints it (file:line: error[id]: ...).
  // The file name with every control character escaped, a newline too (it is one line's prefix), as `check` does.
  const std::string where = d.where.empty() ? "" : printable(d.where, false) + ": ";
  os << "megatron-run: " + where +
            printable(rule_heading(d.level == Diagnostic::Level::Error ? "error" : "warning", d.rule, d.message)) + "\n";
}

std::string diagnostic_text(const Diagnostic& d) { return with_rule_id(d.rule, d.message); }

Diagnostic usage_diagnostic(const UsageError& e) {
  return Diagnostic{Diagnostic::Level::Error, e.rule(), without_where(e.what(), e.where), e.flags, e.where,
                    usage_stage(e.rule())};
}

void print_usage_error(std::ostream& os, const UsageError& e) {
  // The parser's refusals (stage "parse": parse.unknown-argument, parse.invalid-value, ...) keep argparse's line, as
  // Megatron prints them; their id is in `check`'s lines and the JSON documents.
  if (!e.id.empty() && std::string_view(usage_stage(e.id)) != kStageParse)
    return print_diagnostic(os, usage_diagnostic(e));
  // The generic one starts with its place when it came from a file: that place escaped as one line (a newline in
  // the file name too, as print_diagnostic and `check` print it); printable() leaves the escaped text as it is.
  const std::string rest = without_where(e.what(), e.where);
  if (rest.size() == std::string_view(e.what()).size()) return print_error(os, e.what());
  print_error(os, printable(e.where, false) + ": " + rest);
}

std::string diagnostic_json(const Diagnostic& d) {
  std::string out = "{\"rule\": " + json_quote(d.rule) + ", \"level\": " +
                    json_quote(d.level == Diagnostic::Level::Error ? "error" : "warning") +
                    ", \"stage\": " + json_quote(d.stage.empty() ? kStageValidateArgs : d.stage) +
                    ", \"message\": " + json_quote(d.message) + ", \"flags\": [";
  for (size_t i = 0; i < d.flags.size(); ++i) out += (i ? ", " : "") + json_quote(d.flags[i]);
  out += "]";
  out += ", \"where\": " + (d.where.empty() ? std::string("null") : json_quote(d.where));  // null: no place
  return out + "}";
}

std::string failure_json(int exit, const std::vector<Diagnostic>& diagnostics) {
  std::string out = "{\"ok\": false, \"exit\": " + std::to_string(exit) + ", \"diagnostics\": [";
  for (size_t i = 0; i < diagnostics.size(); ++i) out += (i ? ", " : "") + diagnostic_json(diagnostics[i]);
  return out + "]}";
}

}  // namespace mr
