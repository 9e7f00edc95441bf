//! JSON read strictly: an object that names a key twice is refused at any depth. serde_json
//! keeps the last of two equal keys, so `{"decision":"deny","decision":"allow"}` would read as
//! allow — whoever can append to an answer could flip it. Answers that decide something (the
//! classifier's verdict, a hook's) are read through here.

use std::collections::BTreeSet;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parses `text` as one JSON value; a key repeated within one object is an error naming it.
pub fn parse_unique_keys(text: &str) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = Unique.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// A value whose objects have distinct keys, read without building serde_json's map first.
struct Unique;

impl<'de> DeserializeSeed<'de> for Unique {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Unique)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        let mut seen = BTreeSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format!("duplicate key `{key}`")));
            }
            let value = map.next_value_seed(Unique)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// Reads `text` into `T` through [`parse_unique_keys`].
pub fn from_str_unique_keys<T: for<'de> Deserialize<'de>>(
    text: &str,
) -> Result<T, serde_json::Error> {
    serde_json::from_value(parse_unique_keys(text)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_is_refused_at_any_depth() {
        for text in [
            r#"{"a":1,"a":1}"#,
            r#"{"permissionDecision":"deny","permissionDecision":"allow"}"#,
            r#"{"x":{"y":[{"k":1,"k":2}]}}"#,
            r#"{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecision":"allow"}}"#,
        ] {
            let err = parse_unique_keys(text).unwrap_err();
            assert!(err.to_string().contains("duplicate key"), "{text}: {err}");
        }
    }

    #[test]
    fn ordinary_json_reads_as_serde_json_reads_it() {
        for text in [
            r#"{"a":1,"b":[1,2.5,-3,"x",null,true],"c":{"a":{}}}"#,
            "[]",
            "\"s\"",
            "18446744073709551615",
            r#"{"a\u0062":1,"ab2":2}"#,
        ] {
            assert_eq!(
                parse_unique_keys(text).unwrap(),
                serde_json::from_str::<Value>(text).unwrap(),
                "{text}"
            );
        }
        // Escapes spelling the same key are the same key.
        assert!(parse_unique_keys(r#"{"ab":1,"a\u0062":2}"#).is_err());
        assert!(parse_unique_keys(r#"{"a":1} {}"#).is_err());
    }
}
