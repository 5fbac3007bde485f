#include "cmd/usage.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <vector>

#include "engine/spec/schema.hpp"
#include "engine/spec/suggest.hpp"

namespace holmes::cmd {

namespace {

std::vector<std::string> option_names(const CLI::App& command) {
  std::vector<std::string> out;
  for (const CLI::Option* o : command.get_options())
    for (const auto& n : o->get_lnames()) out.push_back("--" + n);
  return out;
}

std::vector<const CLI::App*> subcommands_of(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::App* s : subcommands_of(app)) out.push_back(s->get_name());
  return out;
}

bool is_flag(const CLI::Option& o) { return o.get_expected_max() == 0; }

// What an option takes: "DIR (Checkpoint folder ...)", "INT >= 1 (Timed steps ...)", or for a
// flag "the flag alone (or =true / =false)".
std::string accepted_value(const CLI::Option& o) {
  if (is_flag(o)) return "the flag alone (or =true / =false)";
  const std::string metavar = o.get_option_text().empty() ? o.get_type_name() : o.get_option_text();
  return fmt::format("{} ({})", metavar, o.get_description());
}

// Where an option unknown to holmes-train without a subcommand may have been meant: a
// subcommand's option ("--steps" of bench), or a job-spec key ("--micro-batch" ->
// "--set train.micro_batch=...").
std::string elsewhere(const CLI::App& app, const std::string& name) {
  std::vector<std::string> owners;
  for (const CLI::App* s : subcommands_of(app))
    if (s->get_option_no_throw(name) != nullptr) owners.push_back("'holmes-train " + s->get_name() + "'");
  if (!owners.empty()) return fmt::format(" (an option of {})", fmt::join(owners, " and "));
  std::string key = name.substr(name.find_first_not_of('-'));
  std::replace(key.begin(), key.end(), '-', '_');
  if (const spec::Field* f = spec::find_field_by_leaf(key))
    return fmt::format(" (the job-spec key {} is set with --set {}=VALUE)", f->path, f->path);
  return "";
}

// One argument the command did not expect: an unknown option, an option of another command,
// or a word where no positional argument is taken.
std::string unexpected(const CLI::App& app, const CLI::App& command, const std::string& arg) {
  const bool top = &command == &app;
  if (arg.rfind("-", 0) == 0) {
    const std::string name = arg.substr(0, arg.find('='));
    if (!top && app.get_option_no_throw(name) != nullptr)
      return fmt::format("'{}' is an option of holmes-train without a subcommand, not of '{}'", arg,
                         command.get_name());
    std::string msg = fmt::format("unknown option '{}'", arg);
    if (auto near = spec::nearest(name, option_names(command)); !near.empty())
      return msg + fmt::format(" (did you mean '{}'?)", near);
    return top ? msg + elsewhere(app, name) : msg;
  }
  if (!top) return fmt::format("'{}' takes no positional argument, got '{}'", command.get_name(), arg);
  std::string msg = fmt::format("unexpected argument '{}'", arg);
  if (auto near = spec::nearest(arg, subcommand_names(app)); !near.empty())
    msg += fmt::format(" (did you mean the subcommand '{}'?)", near);
  return msg + fmt::format("; accepted subcommands: {}", fmt::join(subcommand_names(app), ", "));
}

std::string unexpected_arguments(const CLI::App& app, const CLI::App& command) {
  // CLI11 hands what a subcommand does not know back to the top level: take them all, in
  // order. A word right after an unknown option is that option's value, not news.
  std::vector<std::string> parts;
  bool after_unknown_option = false;
  for (const auto& arg : app.remaining(true)) {
    const bool option = arg.rfind("-", 0) == 0;
    if (!option && after_unknown_option) continue;
    after_unknown_option = option;
    parts.push_back(unexpected(app, command, arg));
  }
  if (parts.empty()) return "";
  return fmt::format("{}; accepted options of '{}': {}", fmt::join(parts, "; "), command_name(command),
                     accepted_options(command));
}

// The required options of `command` that were not given.
std::string missing_required(const CLI::App& command) {
  std::vector<std::string> out;
  for (const CLI::Option* o : command.get_options())
    if (o->get_required() && o->count() == 0) out.push_back(o->get_name() + " " + accepted_value(*o));
  return out.empty() ? "" : fmt::format("missing {}", fmt::join(out, "; missing "));
}

// CLI11's texts about one option's values, rewritten to what was seen and what is accepted.
std::string option_value_problem(const CLI::App& command, const std::string& what) {
  static const std::regex no_value(R"(^(\S+): \d+ required .+ missing$)");  // "--steps" given last
  static const std::regex too_many(R"(^(\S+): At Most (\d+) required but received (\d+)$)");
  static const std::regex not_converted(R"(^Could not convert: (\S+) = (.*)$)");  // "--plan-only=maybe"
  std::smatch m;
  auto option = [&](const std::string& name) { return command.get_option_no_throw(name); };
  if (std::regex_match(what, m, no_value) && option(m[1]))
    return fmt::format("{} needs a value; accepted: {}", m[1].str(), accepted_value(*option(m[1])));
  if (std::regex_match(what, m, too_many) && option(m[1]))
    return fmt::format("{} was given {} values; accepted: {}, {}", m[1].str(), m[3].str(),
                       m[2].str() == "1" ? "one" : "at most " + m[2].str(), accepted_value(*option(m[1])));
  if (std::regex_match(what, m, not_converted) && option(m[1]))
    return fmt::format("{}: '{}' is not accepted; accepted: {}", m[1].str(), m[2].str(), accepted_value(*option(m[1])));
  return "";
}

}  // namespace

std::string command_name(const CLI::App& command) {
  return command.get_parent() == nullptr ? "holmes-train" : "holmes-train " + command.get_name();
}

const CLI::App* chosen_subcommand(const CLI::App& app) {
  auto parsed = app.get_subcommands();
  return parsed.empty() ? nullptr : parsed.front();
}

std::string accepted_options(const CLI::App& command) {
  return fmt::format("{}", fmt::join(option_names(command), ", "));
}

std::string option_as_given(const CLI::Option& option) {
  if (is_flag(option)) return option.get_name();
  std::vector<std::string> parts;
  for (const auto& value : option.results()) parts.push_back(option.get_name() + " " + value);
  return fmt::format("{}", fmt::join(parts, " "));
}

std::string describe_parse_error(const CLI::App& app, const CLI::ParseError& e) {
  const CLI::App* sub = chosen_subcommand(app);
  const CLI::App& command = sub != nullptr ? *sub : app;
  const std::string where = sub != nullptr ? sub->get_name() + ": " : "";  // main adds "holmes-train: error: "
  const std::string what = e.what();
  std::string text;
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) text = unexpected_arguments(app, command);
  else if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) text = missing_required(command);
  else if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr) text = what;  // the checks say what is accepted
  else text = option_value_problem(command, what);
  if (!text.empty()) return where + text;
  return fmt::format("{}{}; run '{} --help' for what is accepted", where, what, command_name(command));
}

}  // namespace holmes::cmd
