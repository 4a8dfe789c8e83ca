//! What an edit changes in a JSON document, path by path: shown under the retry-with-input
//! form so a user sees exactly what the new run gets that the original did not.

use serde_json::Value;

/// One difference between two JSON documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// `path` exists only in the edited document.
    Added { path: String, value: String },
    /// `path` exists only in the original.
    Removed { path: String, value: String },
    /// `path` holds another value.
    Changed {
        path: String,
        before: String,
        after: String,
    },
}

/// The differences from `before` to `after`, objects compared key by key (sorted), arrays
/// index by index, anything else as a whole.
pub fn json_changes(before: &Value, after: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk("$", before, after, &mut out);
    out
}

fn walk(path: &str, before: &Value, after: &Value, out: &mut Vec<Change>) {
    // The children both sides have, by path: object keys (sorted), or array indexes.
    let children: Vec<(String, Option<&Value>, Option<&Value>)> = match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .map(|key| {
                    let child = if key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                        format!("{path}.{key}")
                    } else {
                        format!("{path}[{key:?}]")
                    };
                    (child, a.get(key), b.get(key))
                })
                .collect()
        }
        (Value::Array(a), Value::Array(b)) => (0..a.len().max(b.len()))
            .map(|i| (format!("{path}[{i}]"), a.get(i), b.get(i)))
            .collect(),
        (x, y) => {
            if x != y {
                out.push(Change::Changed {
                    path: path.to_owned(),
                    before: x.to_string(),
                    after: y.to_string(),
                });
            }
            return;
        }
    };
    for (child, x, y) in children {
        match (x, y) {
            (Some(x), Some(y)) => walk(&child, x, y, out),
            (Some(x), None) => out.push(Change::Removed {
                path: child,
                value: x.to_string(),
            }),
            (None, Some(y)) => out.push(Change::Added {
                path: child,
                value: y.to_string(),
            }),
            (None, None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn changes_are_listed_by_path() {
        let before = json!({"ok": false, "items": [1, 2], "gone": "x", "same": {"a": 1}});
        let after = json!({"ok": true, "items": [1, 3, 4], "new key": null, "same": {"a": 1}});
        assert_eq!(
            json_changes(&before, &after),
            [
                Change::Removed {
                    path: "$.gone".into(),
                    value: "\"x\"".into()
                },
                Change::Changed {
                    path: "$.items[1]".into(),
                    before: "2".into(),
                    after: "3".into()
                },
                Change::Added {
                    path: "$.items[2]".into(),
                    value: "4".into()
                },
                Change::Added {
                    path: "$[\"new key\"]".into(),
                    value: "null".into()
                },
                Change::Changed {
                    path: "$.ok".into(),
                    before: "false".into(),
                    after: "true".into()
                },
            ]
        );
        assert!(json_changes(&before, &before).is_empty());
        assert_eq!(
            json_changes(&json!(1), &json!("1")),
            [Change::Changed {
                path: "$".into(),
                before: "1".into(),
                after: "\"1\"".into()
            }]
        );
    }
}
