//! An instance's own claim lists (`files_claimed`, `claim_tokens`) kept as the JSON text they
//! were read from until something looks at them (issue 35). A claim reads and rewrites the
//! whole `status.json`, yet it changes the lists of one or two instances: every other
//! instance's lists (at 10,000 claims, most of the file's strings) are checked when read,
//! written back as the same text, and never decoded into strings.
//!
//! Reading the value ([`std::ops::Deref`]) decodes the text once; changing it
//! ([`std::ops::DerefMut`]) drops the text, so a changed list is always written from its value.
//! The text is written back as it is only while `status.json` itself is being encoded
//! ([`writing_state`]): it was read from the same place of a document of the same shape, so it
//! is what encoding the value would write. Anything else that serializes an instance (`status
//! --json`, MCP answers) gets the value.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

/// What a claim list is decoded into, and checked as, from its text.
pub trait ListValue: Sized + Default {
    /// The value, decoded where it is met.
    fn eager<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error>;
    /// The value of a text [`Self::check`] accepted.
    fn decode(text: &str) -> serde_json::Result<Self> {
        let mut d = serde_json::Deserializer::from_str(text);
        let v = Self::eager(&mut d)?;
        d.end()?;
        Ok(v)
    }
    /// What decoding checks (the schema's rule), without building the value.
    fn check(text: &str) -> serde_json::Result<()>;
    fn is_empty(&self) -> bool;
}

/// A claim list, decoded when first read. See the module's documentation.
pub struct Lazy<T> {
    value: OnceLock<T>,
    /// The text it was read from, while the value has not been changed.
    text: Option<Box<RawValue>>,
}

impl<T: ListValue> Lazy<T> {
    /// A list read as `text`, which [`ListValue::check`] accepted.
    fn from_text(text: Box<RawValue>) -> Lazy<T> {
        Lazy {
            value: OnceLock::new(),
            text: Some(text),
        }
    }

    fn value(&self) -> &T {
        self.value.get_or_init(|| match &self.text {
            Some(t) => T::decode(t.get()).expect("a claim list is checked when read"),
            None => T::default(),
        })
    }

    /// True for an empty list, without decoding it.
    pub fn is_empty(&self) -> bool {
        match (self.value.get(), &self.text) {
            (Some(v), _) => v.is_empty(),
            (None, Some(t)) => {
                let inner = t.get().trim();
                inner.len() >= 2 && inner[1..inner.len() - 1].trim().is_empty()
            }
            (None, None) => true,
        }
    }
}

impl<T: ListValue> std::ops::Deref for Lazy<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value()
    }
}

impl<T: ListValue> std::ops::DerefMut for Lazy<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value();
        self.text = None;
        self.value.get_mut().expect("decoded above")
    }
}

impl<'a, T: ListValue> IntoIterator for &'a Lazy<T>
where
    &'a T: IntoIterator,
{
    type Item = <&'a T as IntoIterator>::Item;
    type IntoIter = <&'a T as IntoIterator>::IntoIter;
    fn into_iter(self) -> Self::IntoIter {
        self.value().into_iter()
    }
}

impl<T: ListValue> From<T> for Lazy<T> {
    fn from(v: T) -> Lazy<T> {
        Lazy {
            value: OnceLock::from(v),
            text: None,
        }
    }
}

impl<T: ListValue> Default for Lazy<T> {
    fn default() -> Lazy<T> {
        T::default().into()
    }
}

impl<T: ListValue + Clone> Clone for Lazy<T> {
    fn clone(&self) -> Lazy<T> {
        Lazy {
            value: self.value.clone(),
            text: self.text.clone(),
        }
    }
}

impl<T: ListValue + PartialEq> PartialEq for Lazy<T> {
    fn eq(&self, other: &Lazy<T>) -> bool {
        self.value() == other.value()
    }
}

impl<T: ListValue + PartialEq, U> PartialEq<U> for Lazy<T>
where
    T: PartialEq<U>,
    U: NotLazy,
{
    fn eq(&self, other: &U) -> bool {
        self.value() == other
    }
}

/// The types a claim list compares with directly (`list == ["/a"]` in tests and checks).
pub trait NotLazy {}
impl<const N: usize> NotLazy for [&str; N] {}
impl NotLazy for Vec<String> {}
impl NotLazy for Vec<&str> {}
impl NotLazy for BTreeMap<String, u64> {}

impl<T: ListValue + fmt::Debug> fmt::Debug for Lazy<T> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.value().fmt(f)
    }
}

thread_local! {
    /// Set while `status.json` is encoded: unchanged lists are written as the text they were
    /// read from.
    static WRITING_STATE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set while `status.json` is read for a transaction ([`lazily`]).
    static LAZY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `decode` (of `status.json`, for a transaction, which changes the lists of the instances
/// it is about) keeping every claim list as its text. Elsewhere lists are decoded where they
/// are met: a reader that shows every instance (`status`) would decode each list twice.
pub(crate) fn lazily<R>(decode: impl FnOnce() -> R) -> R {
    with_flag(&LAZY, decode)
}

/// Run `encode` (of `status.json`, pretty) writing every unchanged claim list as its text.
pub(crate) fn writing_state<R>(encode: impl FnOnce() -> R) -> R {
    with_flag(&WRITING_STATE, encode)
}

/// Run `f` with `flag` set (a decoding or encoding mode of this thread), then put it back as it
/// was, even if `f` panics.
pub(crate) fn with_flag<R>(
    flag: &'static std::thread::LocalKey<std::cell::Cell<bool>>,
    f: impl FnOnce() -> R,
) -> R {
    struct Reset(&'static std::thread::LocalKey<std::cell::Cell<bool>>, bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            let was = self.1;
            self.0.with(|w| w.set(was));
        }
    }
    let was = flag.with(|w| w.replace(true));
    let _reset = Reset(flag, was);
    f()
}

impl<T: ListValue + Serialize> Serialize for Lazy<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.text {
            Some(t) if WRITING_STATE.with(std::cell::Cell::get) => t.serialize(s),
            _ => self.value().serialize(s),
        }
    }
}

/// Read a claim list: decoded, or (while [`lazily`]) as its text, checked
/// ([`ListValue::check`]); `what` names it in an error.
pub fn read<'de, T: ListValue, D: Deserializer<'de>>(
    d: D,
    what: &str,
) -> Result<Lazy<T>, D::Error> {
    if !LAZY.with(std::cell::Cell::get) {
        return T::eager(d).map(Lazy::from);
    }
    let text = Box::<RawValue>::deserialize(d)?;
    T::check(text.get()).map_err(|e| de::Error::custom(format!("{what}: {e}")))?;
    Ok(Lazy::from_text(text))
}

/// A string, checked and dropped.
struct AnyStr;

impl<'de> Deserialize<'de> for AnyStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<AnyStr, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = AnyStr;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<AnyStr, E> {
                Ok(AnyStr)
            }
        }
        d.deserialize_str(V)
    }
}

impl ListValue for Vec<String> {
    fn eager<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<String>::deserialize(d)
    }
    fn check(text: &str) -> serde_json::Result<()> {
        struct Strings;
        impl<'de> Visitor<'de> for Strings {
            type Value = ();
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of paths")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
                while s.next_element::<AnyStr>()?.is_some() {}
                Ok(())
            }
        }
        let mut d = serde_json::Deserializer::from_str(text);
        d.deserialize_seq(Strings)?;
        d.end()
    }
    fn is_empty(&self) -> bool {
        Vec::is_empty(self)
    }
}

impl ListValue for BTreeMap<String, u64> {
    fn eager<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Built in one pass from the entries (written sorted); a repeated key keeps its last
        // value, as in a generic JSON value.
        struct Tokens;
        impl<'de> Visitor<'de> for Tokens {
            type Value = BTreeMap<String, u64>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object mapping paths to fencing tokens")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(m.size_hint().unwrap_or(0));
                while let Some(entry) = m.next_entry::<String, u64>()? {
                    out.push(entry);
                }
                Ok(BTreeMap::from_iter(out))
            }
        }
        d.deserialize_map(Tokens)
    }
    fn check(text: &str) -> serde_json::Result<()> {
        struct Tokens;
        impl<'de> Visitor<'de> for Tokens {
            type Value = ();
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object mapping paths to fencing tokens")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
                while m.next_entry::<AnyStr, u64>()?.is_some() {}
                Ok(())
            }
        }
        let mut d = serde_json::Deserializer::from_str(text);
        d.deserialize_map(Tokens)?;
        d.end()
    }
    fn is_empty(&self) -> bool {
        BTreeMap::is_empty(self)
    }
}

/// Skip a claim list (a glance reads no instance's own lists).
pub fn skip<'de, T: ListValue, D: Deserializer<'de>>(d: D) -> Result<Lazy<T>, D::Error> {
    d.deserialize_ignored_any(IgnoredAny)?;
    Ok(Lazy::default())
}

#[cfg(test)]
mod tests {
    use crate::protocol::{State, codec};
    use std::path::Path;

    fn state() -> State {
        let text = std::fs::read("fixtures/valid/status-1000-claims.json").unwrap();
        decode(&text)
    }

    /// Read as a transaction reads it.
    fn decode(bytes: &[u8]) -> State {
        <State as crate::store::Document>::decode_for_update(Path::new("status.json"), bytes)
            .unwrap()
    }

    /// Every list decoded, as if read eagerly.
    fn eager(st: &State) -> State {
        let mut st = st.clone();
        for i in &mut st.instances {
            let _ = &mut *i.files_claimed;
            let _ = &mut *i.claim_tokens;
        }
        st
    }

    #[test]
    fn unchanged_lists_are_written_as_read_and_a_changed_one_as_its_value() {
        let text = std::fs::read("fixtures/valid/status-1000-claims.json").unwrap();
        let st = state();
        // Written by conductor: the same bytes back, from the text.
        let again = codec::encode(&st);
        assert_eq!(again, codec::encode(&eager(&st)));
        let reread = decode(&again);
        assert_eq!(codec::encode(&reread), again);
        // One instance's lists changed, the others' kept as text: what encoding every value
        // writes.
        let mut changed = reread.clone();
        let first = &mut changed.instances[0];
        first.files_claimed.push("/p/new.rs".into());
        first.claim_tokens.insert("/p/new.rs".into(), 99_999);
        let last = changed.instances.last_mut().unwrap();
        last.files_claimed.clear();
        last.claim_tokens.clear();
        assert_eq!(codec::encode(&changed), codec::encode(&eager(&changed)));
        assert_ne!(codec::encode(&changed), again);
        // Read without changing: still the text.
        let read_only = reread.clone();
        assert!(
            read_only
                .instances
                .iter()
                .map(|i| i.files_claimed.len())
                .sum::<usize>()
                > 0
        );
        assert_eq!(codec::encode(&read_only), again);
        let _ = text;
    }

    #[test]
    fn a_list_of_the_wrong_shape_is_refused_when_read_naming_it() {
        let text = std::fs::read_to_string("fixtures/valid/status-1000-claims.json").unwrap();
        let st = state();
        let id = &st.instances[0].id;
        let bad_list = text.replacen("\"files_claimed\": [", "\"files_claimed\": [1,", 1);
        let e = <State as crate::store::Document>::decode_for_update(
            Path::new("status.json"),
            bad_list.as_bytes(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("files_claimed"), "{e}");
        assert!(codec::decode(Path::new("status.json"), bad_list.as_bytes()).is_err());
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let inst = v["instances"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|i| i["id"] == id.as_str())
            .unwrap();
        inst["claim_tokens"] = serde_json::json!({"/p/a": -1});
        let bad_token = serde_json::to_vec_pretty(&v).unwrap();
        let e = <State as crate::store::Document>::decode_for_update(
            Path::new("status.json"),
            &bad_token,
        )
        .unwrap_err();
        assert!(e.to_string().contains("claim_tokens"), "{e}");
        assert!(codec::decode(Path::new("status.json"), &bad_token).is_err());
        inst_tokens_ok(&mut v, id);
    }

    fn inst_tokens_ok(v: &mut serde_json::Value, id: &str) {
        let inst = v["instances"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|i| i["id"] == id)
            .unwrap();
        inst["claim_tokens"] = serde_json::json!({"/p/a": 3});
        let ok = serde_json::to_vec_pretty(&v).unwrap();
        let st = decode(&ok);
        assert_eq!(st.instance(id).unwrap().claim_tokens.get("/p/a"), Some(&3));
    }
}
