//! Tools derived from the CLI's own argument definitions: one field per flag or positional
//! (the flag's name in snake_case), its JSON type from the flag's value parser, required
//! when the flag is, an enum when the flag has possible values. Because the schema is read
//! from the same `clap::Command` the binary parses, a tool can never drift from its command.
//!
//! A call's arguments are checked against that schema here, before anything runs (unknown
//! field ⇒ refused with a did-you-mean; wrong type, missing required, value outside the enum
//! ⇒ refused naming the field), then turned into the command line the CLI parses.

use serde_json::{Map, Value, json};
use std::any::TypeId;

/// The JSON type of one field.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// A flag without a value (`--fresh`).
    Flag,
    /// A whole number, `min` and up.
    Integer {
        /// The smallest value the flag's type holds.
        min: Option<i64>,
    },
    /// Any number.
    Number,
    /// Free text.
    Text,
    /// One of the listed values.
    Choice(Vec<String>),
}

/// One field of a tool: a flag or a positional of the command.
#[derive(Debug, Clone)]
pub struct Field {
    /// The field name (the flag's id: `seed_oracle`).
    pub name: String,
    /// `--seed-oracle`, or `None` for a positional.
    pub long: Option<String>,
    /// `-k` when the flag has no long name.
    pub short: Option<char>,
    /// The JSON type (of each element when `many`).
    pub kind: Kind,
    /// The flag may be given several times (an array).
    pub many: bool,
    /// The command refuses to run without it.
    pub required: bool,
    /// The flag's help line.
    pub help: String,
}

/// A tool: a command path (`["loop", "run"]`) and its fields in the command's order.
#[derive(Debug, Clone)]
pub struct ToolDef {
    /// The tool name (`exhaust`, `loop_run`).
    pub name: String,
    /// The subcommand path below `work`.
    pub path: Vec<String>,
    /// The command's about line.
    pub about: String,
    /// Its fields.
    pub fields: Vec<Field>,
}

/// Arguments that are never tool fields: the output switch (every call is `--json`), help,
/// version, and the global flags (the server's own `-C`, `--state-dir`, `-c` apply).
const NOT_FIELDS: [&str; 3] = ["json", "help", "version"];

impl ToolDef {
    /// Reads the tool from the subcommand at `path` of `root` (the `work` command).
    pub fn from_command(root: &clap::Command, name: &str, path: &[&str]) -> Option<ToolDef> {
        let mut cmd = root.clone();
        cmd.build();
        let mut sub = &cmd;
        for p in path {
            sub = sub.find_subcommand(p)?;
        }
        let globals: Vec<String> =
            cmd.get_arguments().filter(|a| a.is_global_set()).map(|a| a.get_id().to_string()).collect();
        let mut fields: Vec<Field> = sub
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter(|a| !NOT_FIELDS.contains(&a.get_id().as_str()) && !globals.iter().any(|g| g == a.get_id()))
            .map(field_of)
            .collect();
        for f in &mut fields {
            checked_by_the_command(name, f);
        }
        Some(ToolDef {
            name: name.into(),
            path: path.iter().map(|s| s.to_string()).collect(),
            about: sub.get_about().map(|s| s.to_string()).unwrap_or_default(),
            fields,
        })
    }

    /// The JSON Schema of the arguments (no other property is accepted).
    pub fn input_schema(&self) -> Map<String, Value> {
        let mut props = Map::new();
        for f in &self.fields {
            let mut one = match &f.kind {
                Kind::Flag => json!({"type": "boolean"}),
                Kind::Integer { min: Some(m) } => json!({"type": "integer", "minimum": m}),
                Kind::Integer { min: None } => json!({"type": "integer"}),
                Kind::Number => json!({"type": "number"}),
                Kind::Text => json!({"type": "string"}),
                Kind::Choice(v) => json!({"type": "string", "enum": v}),
            };
            if f.many {
                one = json!({"type": "array", "items": one});
            }
            if let Value::Object(o) = &mut one {
                let flag = f.long.as_ref().map(|l| format!("--{l}")).unwrap_or_else(|| "positional".into());
                o.insert("description".into(), json!(format!("{} ({flag})", f.help)));
            }
            props.insert(f.name.clone(), one);
        }
        let required: Vec<&str> = self.fields.iter().filter(|f| f.required).map(|f| f.name.as_str()).collect();
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        schema.insert("properties".into(), Value::Object(props));
        if !required.is_empty() {
            schema.insert("required".into(), json!(required));
        }
        let any_of: Vec<Value> = one_of_required(&self.name)
            .iter()
            .filter(|set| set.iter().all(|n| self.fields.iter().any(|f| f.name == *n)))
            .map(|set| json!({"required": set}))
            .collect();
        if !any_of.is_empty() {
            schema.insert("anyOf".into(), Value::Array(any_of));
        }
        schema.insert("additionalProperties".into(), json!(false));
        schema
    }

    /// Checks `args` against the schema and returns the command line after `work`
    /// (`exhaust --k=3 --json -- WHAT`). The error names the field.
    pub fn argv(&self, args: &Map<String, Value>) -> Result<Vec<String>, String> {
        for key in args.keys() {
            if !self.fields.iter().any(|f| &f.name == key) {
                let names: Vec<&str> = self.fields.iter().map(|f| f.name.as_str()).collect();
                return Err(match did_you_mean(key, &names) {
                    Some(s) => format!("{}: unknown field `{key}` (did you mean `{s}`?)", self.name),
                    None => format!("{}: unknown field `{key}` (fields: {})", self.name, names.join(", ")),
                });
            }
        }
        let mut flags = self.path.clone();
        let mut positionals = Vec::new();
        for f in &self.fields {
            let Some(v) = args.get(&f.name).filter(|v| !v.is_null()) else {
                if f.required {
                    return Err(format!("{}: field `{}` is required", self.name, f.name));
                }
                continue;
            };
            let values: Vec<&Value> = match (f.many, v) {
                (true, Value::Array(a)) => a.iter().collect(),
                (true, _) => return Err(format!("{}: field `{}` must be an array", self.name, f.name)),
                (false, v) => vec![v],
            };
            for v in values {
                let text =
                    f.value_text(v).map_err(|want| format!("{}: field `{}` must be {want}", self.name, f.name))?;
                match (&f.long, f.short, text) {
                    (_, _, None) => {}
                    (None, None, Some(t)) => positionals.push(t),
                    (Some(l), _, Some(t)) if f.kind == Kind::Flag => flags.push(format!("--{l}{t}")),
                    (Some(l), _, Some(t)) => flags.push(format!("--{l}={t}")),
                    (None, Some(c), Some(t)) if f.kind == Kind::Flag => flags.push(format!("-{c}{t}")),
                    (None, Some(c), Some(t)) => flags.extend([format!("-{c}"), t]),
                }
            }
        }
        flags.push("--json".into());
        if !positionals.is_empty() {
            flags.push("--".into());
            flags.extend(positionals);
        }
        Ok(flags)
    }

    /// Rewrites a CLI message's flag names (`--seed-oracle`) into this tool's field names
    /// (`seed_oracle`), so that a refusal names the field the caller sent.
    pub fn name_fields(&self, message: &str) -> String {
        let mut out = String::new();
        let mut rest = message;
        while let Some(i) = rest.find("--") {
            out.push_str(&rest[..i]);
            let after = &rest[i + 2..];
            let len = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).unwrap_or(after.len());
            let flag = &after[..len];
            match self.fields.iter().find(|f| f.long.as_deref() == Some(flag) && !flag.is_empty()) {
                Some(f) => out.push_str(&f.name),
                None => {
                    out.push_str("--");
                    out.push_str(flag);
                }
            }
            rest = &after[len..];
        }
        out.push_str(rest);
        out
    }
}

impl Field {
    /// The command-line text of one JSON value (`None`: a false flag, nothing to pass), or
    /// what was expected.
    fn value_text(&self, v: &Value) -> Result<Option<String>, String> {
        match (&self.kind, v) {
            (Kind::Flag, Value::Bool(true)) => Ok(Some(String::new())),
            (Kind::Flag, Value::Bool(false)) => Ok(None),
            (Kind::Flag, _) => Err("true or false".into()),
            (Kind::Integer { min }, Value::Number(n)) if n.is_i64() || n.is_u64() => {
                let below = min.is_some_and(|m| n.as_i64().is_some_and(|x| x < m));
                if below { Err(format!("at least {}", min.unwrap_or(0))) } else { Ok(Some(n.to_string())) }
            }
            (Kind::Integer { .. }, _) => Err("a whole number".into()),
            (Kind::Number, Value::Number(n)) => Ok(Some(n.to_string())),
            (Kind::Number, _) => Err("a number".into()),
            (Kind::Text, Value::String(s)) => Ok(Some(s.clone())),
            (Kind::Text, _) => Err("a string".into()),
            (Kind::Choice(c), Value::String(s)) if c.contains(s) => Ok(Some(s.clone())),
            (Kind::Choice(c), _) => Err(format!("one of {}", c.join(", "))),
        }
    }

    /// The JSON value of one command-line text (the inverse of `value_text`).
    fn json_of(&self, text: &str) -> Value {
        match &self.kind {
            Kind::Flag => json!(true),
            Kind::Integer { .. } => text.parse::<i64>().map(Value::from).unwrap_or_else(|_| json!(text)),
            Kind::Number => text.parse::<f64>().map(Value::from).unwrap_or_else(|_| json!(text)),
            Kind::Text | Kind::Choice(_) => json!(text),
        }
    }
}

fn field_of(a: &clap::Arg) -> Field {
    let takes_value = a.get_num_args().is_some_and(|n| n.takes_values());
    let vp = a.get_value_parser();
    let id = vp.type_id();
    let possible: Vec<String> = a.get_possible_values().iter().map(|p| p.get_name().to_string()).collect();
    let kind = if !takes_value || matches!(a.get_action(), clap::ArgAction::SetTrue) {
        Kind::Flag
    } else if !possible.is_empty() {
        Kind::Choice(possible)
    } else if [TypeId::of::<u8>(), TypeId::of::<u16>(), TypeId::of::<u32>(), TypeId::of::<u64>(), TypeId::of::<usize>()]
        .iter()
        .any(|t| id == *t)
    {
        Kind::Integer { min: Some(0) }
    } else if [TypeId::of::<i32>(), TypeId::of::<i64>()].iter().any(|t| id == *t) {
        Kind::Integer { min: None }
    } else if id == TypeId::of::<f64>() || id == TypeId::of::<f32>() {
        Kind::Number
    } else {
        Kind::Text
    };
    let many = matches!(a.get_action(), clap::ArgAction::Append);
    Field {
        name: a.get_id().to_string(),
        long: a.get_long().map(str::to_string),
        short: if a.get_long().is_none() { a.get_short() } else { None },
        kind,
        many,
        required: a.is_required_set(),
        help: a.get_help().map(|h| h.to_string()).unwrap_or_default(),
    }
}

/// What a command checks itself, before anything runs, beyond what its clap definition says
/// (a flag optional for clap because another subcommand or a carrier can stand in for it):
/// exhaust's `k` is at least 2; a new until session needs its condition and its goal.
fn checked_by_the_command(tool: &str, f: &mut Field) {
    match (tool, f.name.as_str()) {
        ("exhaust", "k") => f.kind = Kind::Integer { min: Some(2) },
        ("until", "until" | "goal") => f.required = true,
        _ => {}
    }
}

/// The sets of fields of which a call must carry one (a carrier stands in for the flags):
/// implement needs a plan, edit a description and a definition site.
fn one_of_required(tool: &str) -> Vec<Vec<&'static str>> {
    match tool {
        "implement" => vec![vec!["plan"], vec!["carrier"], vec!["carrier_file"]],
        "edit" => vec![vec!["description", "def_site"], vec!["carrier"], vec!["carrier_file"]],
        _ => vec![],
    }
}

/// The closest name within two edits, when one is.
pub fn did_you_mean<'a>(wrong: &str, names: &[&'a str]) -> Option<&'a str> {
    names
        .iter()
        .map(|n| (work_runtime::suggest::distance(wrong, n), *n))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

/// A `work …` command line (as a result prints it, e.g. `work loop run docs/specs/x
/// --resume`) as a tool call: the tool and its arguments, when one of `tools` is that command.
pub fn call_of_command(root: &clap::Command, tools: &[ToolDef], command: &str) -> Option<(String, Value)> {
    let words = shell_words::split(command).ok()?;
    if words.first().map(String::as_str) != Some("work") {
        return None;
    }
    let matches = root.clone().try_get_matches_from(&words).ok()?;
    let mut m = &matches;
    let mut path = Vec::new();
    while let Some((name, sub)) = m.subcommand() {
        path.push(name.to_string());
        m = sub;
    }
    let tool = tools.iter().find(|t| t.path == path)?;
    let mut args = Map::new();
    for f in &tool.fields {
        if m.value_source(&f.name) != Some(clap::parser::ValueSource::CommandLine) {
            continue;
        }
        let texts: Vec<String> = match f.kind {
            Kind::Flag => vec![String::new()],
            _ => m.get_raw(&f.name)?.map(|s| s.to_string_lossy().into_owned()).collect(),
        };
        let values: Vec<Value> = texts.iter().map(|t| f.json_of(t)).collect();
        let v = if f.many { Value::Array(values) } else { values.into_iter().next()? };
        args.insert(f.name.clone(), v);
    }
    Some((tool.name.clone(), Value::Object(args)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> clap::Command {
        clap::Command::new("work").arg(clap::Arg::new("state_dir").long("state-dir").global(true)).subcommand(
            clap::Command::new("exhaust")
                .about("Discovery until dry.")
                .arg(clap::Arg::new("what").required(true))
                .arg(clap::Arg::new("k").short('k').long("k").value_parser(clap::value_parser!(u32)).default_value("3"))
                .arg(clap::Arg::new("seed_oracle").long("seed-oracle").action(clap::ArgAction::Append))
                .arg(clap::Arg::new("budget_usd").long("budget-usd").value_parser(clap::value_parser!(f64)))
                .arg(clap::Arg::new("mode").long("mode").value_parser(["auto", "human-gate"]))
                .arg(clap::Arg::new("fresh").long("fresh").action(clap::ArgAction::SetTrue))
                .arg(clap::Arg::new("json").long("json").action(clap::ArgAction::SetTrue)),
        )
    }

    fn tool() -> ToolDef {
        ToolDef::from_command(&cli(), "exhaust", &["exhaust"]).expect("exhaust")
    }

    #[test]
    fn schema_mirrors_the_flags() {
        let s = Value::Object(tool().input_schema());
        let props = s["properties"].as_object().expect("properties");
        let names: Vec<&str> = props.keys().map(String::as_str).collect();
        assert_eq!(names, ["what", "k", "seed_oracle", "budget_usd", "mode", "fresh"]);
        assert_eq!(s["required"], json!(["what"]));
        assert_eq!(props["k"]["type"], "integer");
        assert_eq!(props["k"]["minimum"], 2, "exhaust's K is at least 2");
        assert_eq!(props["seed_oracle"]["type"], "array");
        assert_eq!(props["budget_usd"]["type"], "number");
        assert_eq!(props["mode"]["enum"], json!(["auto", "human-gate"]));
        assert_eq!(props["fresh"]["type"], "boolean");
        assert_eq!(s["additionalProperties"], false);
    }

    #[test]
    fn arguments_become_the_command_line() {
        let args =
            json!({"what": "-x sites", "k": 2, "seed_oracle": ["grep a", "grep b"], "fresh": true, "mode": "auto"});
        let argv = tool().argv(args.as_object().expect("object")).expect("valid");
        assert_eq!(
            argv,
            [
                "exhaust",
                "--k=2",
                "--seed-oracle=grep a",
                "--seed-oracle=grep b",
                "--mode=auto",
                "--fresh",
                "--json",
                "--",
                "-x sites"
            ]
        );
        // The CLI parses it back to the same values.
        let m = cli().try_get_matches_from(std::iter::once("work".to_string()).chain(argv)).expect("parses");
        let (_, m) = m.subcommand().expect("sub");
        assert_eq!(m.get_one::<String>("what").map(String::as_str), Some("-x sites"));
    }

    #[test]
    fn bad_arguments_name_the_field() {
        let t = tool();
        let check = |args: Value, want: &str| {
            let e = t.argv(args.as_object().expect("object")).expect_err("refused");
            assert!(e.contains(want), "{e}");
        };
        check(
            json!({"what": "x", "seed_oracles": ["a"]}),
            "unknown field `seed_oracles` (did you mean `seed_oracle`?)",
        );
        check(json!({"k": 2}), "field `what` is required");
        check(json!({"what": "x", "k": "2"}), "field `k` must be a whole number");
        check(json!({"what": "x", "k": 1}), "field `k` must be at least 2");
        check(json!({"what": "x", "seed_oracle": "a"}), "field `seed_oracle` must be an array");
        check(json!({"what": "x", "mode": "fast"}), "field `mode` must be one of auto, human-gate");
        check(json!({"what": "x", "json": true}), "unknown field `json`");
        check(json!({"what": "x", "state_dir": "/tmp"}), "unknown field `state_dir`");
    }

    #[test]
    fn messages_speak_of_fields_and_commands_become_calls() {
        let t = tool();
        assert_eq!(
            t.name_fields("start exhaust: --k must be at least 2; --kk stays"),
            "start exhaust: k must be at least 2; --kk stays"
        );
        let (name, args) =
            call_of_command(&cli(), &[t], "work exhaust 'all sites' --k 4 --fresh --seed-oracle 'grep x'")
                .expect("a call");
        assert_eq!(name, "exhaust");
        assert_eq!(args, json!({"what": "all sites", "k": 4, "seed_oracle": ["grep x"], "fresh": true}));
    }
}
