//! Where in the application a statement came from, as its sqlcommenter comment says
//! (`controller`, `action`, `route`, `framework`, `application`): what findings are grouped by
//! and named after ("N+1 loop in controller `orders#index`").

use std::fmt;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::fingerprint::{Tags, decode_tag, hash_value};

/// Origins a connection keeps decoded; cleared when full.
const ORIGIN_CACHE: usize = 256;
/// Longest tag value kept, in bytes: a route or controller name, not a document.
const MAX_VALUE: usize = 200;

/// The tags that place a statement in the application. Per-request tags (`traceparent`,
/// `tracestate`) are not part of it: they would make every request a place of its own.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Origin {
    /// sqlcommenter `controller` (Rails, Django's view module, ...), percent-decoded, at most 200 bytes.
    pub controller: Option<Box<str>>,
    /// sqlcommenter `action`: the controller's method.
    pub action: Option<Box<str>>,
    /// sqlcommenter `route`: the URL pattern served (`/orders/:id`).
    pub route: Option<Box<str>>,
    /// sqlcommenter `framework` (`rails_v7`, `spring`, ...).
    pub framework: Option<Box<str>>,
    /// sqlcommenter `application`: which service sent it, when several share a database.
    pub application: Option<Box<str>>,
}

impl Origin {
    /// The origin the tags name, if they name any part of one.
    pub fn of(tags: &Tags<'_>) -> Option<Origin> {
        let value = |key: &str| {
            tags.get(key).map(|v| {
                let mut s = String::new();
                decode_tag(v.get(..MAX_VALUE).unwrap_or(v), &mut s);
                s.into_boxed_str()
            })
        };
        let origin = Origin {
            controller: value("controller"),
            action: value("action"),
            route: value("route"),
            framework: value("framework"),
            application: value("application"),
        };
        (origin != Origin::default()).then_some(origin)
    }

    /// The tags as (key, value) pairs, in a fixed order.
    pub fn pairs(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("controller", &self.controller),
            ("action", &self.action),
            ("route", &self.route),
            ("framework", &self.framework),
            ("application", &self.application),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.as_deref().map(|v| (k, v)))
    }
}

/// How a person would name the place: "controller `orders#index`", "route `/orders/:id`",
/// "action `index`", "application `shop`" or "framework `django`", the most specific first.
impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.controller, &self.action, &self.route) {
            (Some(c), Some(a), _) => write!(f, "controller `{c}#{a}`"),
            (Some(c), None, _) => write!(f, "controller `{c}`"),
            (None, _, Some(r)) => write!(f, "route `{r}`"),
            (None, Some(a), None) => write!(f, "action `{a}`"),
            (None, None, None) => match (&self.application, &self.framework) {
                (Some(a), _) => write!(f, "application `{a}`"),
                (None, Some(fw)) => write!(f, "framework `{fw}`"),
                (None, None) => Ok(()),
            },
        }
    }
}

/// A connection's decoded origins, by the hash of the comment they came from: a statement
/// repeated with the same tags costs a hash and a refcount, not a decode.
#[derive(Default)]
pub struct Origins {
    cache: HashMap<u64, Option<Arc<Origin>>>,
}

impl Origins {
    /// The origin in `comment` (a sqlcommenter comment's body).
    pub fn of(&mut self, comment: &[u8]) -> Option<Arc<Origin>> {
        let key = hash_value(comment);
        if let Some(o) = self.cache.get(&key) {
            return o.clone();
        }
        if self.cache.len() >= ORIGIN_CACHE {
            self.cache.clear();
        }
        let origin = Tags::of(comment).and_then(|t| Origin::of(&t)).map(Arc::new);
        self.cache.insert(key, origin.clone());
        origin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(comment: &str) -> Option<Arc<Origin>> {
        Origins::default().of(comment.as_bytes())
    }

    #[test]
    fn names_the_most_specific_place() {
        let o = origin("action='index',controller='orders',framework='rails',route='%2Forders'").unwrap();
        assert_eq!(o.to_string(), "controller `orders#index`");
        assert_eq!(origin("route='%2Forders%2F%3Aid',framework='flask'").unwrap().to_string(), "route `/orders/:id`");
        assert_eq!(origin("application='shop',framework='django'").unwrap().to_string(), "application `shop`");
        let pairs: Vec<_> = o.pairs().collect();
        assert_eq!(
            pairs,
            [("controller", "orders"), ("action", "index"), ("route", "/orders"), ("framework", "rails")]
        );
    }

    #[test]
    fn per_request_tags_alone_are_no_origin() {
        assert_eq!(origin("traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'"), None);
        assert_eq!(origin("just prose"), None);
    }
}
