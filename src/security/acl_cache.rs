//! A set of ACLs and the index authorization checks use.
//!
//! Invariants:
//! * A binding is in the set at most once; adding one already present
//!   changes nothing (Kafka's CreateAcls answers success for it and writes no
//!   record).
//! * Each resource type's entries are indexed by LITERAL name, the LITERAL
//!   `*`, and PREFIXED name together with the multiset of prefixed names'
//!   byte lengths, so finding the entries that apply to a name costs one
//!   lookup per distinct prefix length not longer than the name, never a
//!   scan of every ACL. Prefixes are taken at char boundaries, which for
//!   valid Unicode is Java's `startsWith` on UTF-16.
//! * The index and `all` always hold the same bindings: both change only in
//!   [`AclCache::add`] and [`AclCache::remove`].
//! * A cache is a value: the authorizer shares an installed one behind an
//!   `Arc` and never changes it; a change builds a new cache from a clone.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclError, PatternType, ResourceType,
    WILDCARD_RESOURCE,
};

/// The entries of one resource type, by pattern.
#[derive(Debug, Clone, Default)]
struct TypeIndex {
    /// LITERAL patterns other than `*`, by name.
    literal: HashMap<String, Vec<AccessControlEntry>>,
    /// LITERAL `*`.
    wildcard: Vec<AccessControlEntry>,
    /// PREFIXED patterns, by name.
    prefixed: HashMap<String, Vec<AccessControlEntry>>,
    /// Byte length of each prefixed name → how many names have it.
    prefix_lens: BTreeMap<usize, usize>,
}

impl TypeIndex {
    fn entries_mut(
        &mut self,
        pattern_type: PatternType,
        name: &str,
    ) -> &mut Vec<AccessControlEntry> {
        match pattern_type {
            PatternType::Literal if name == WILDCARD_RESOURCE => &mut self.wildcard,
            PatternType::Literal => self.literal.entry(name.to_string()).or_default(),
            _ => {
                if !self.prefixed.contains_key(name) {
                    *self.prefix_lens.entry(name.len()).or_default() += 1;
                }
                self.prefixed.entry(name.to_string()).or_default()
            }
        }
    }

    fn remove(&mut self, pattern_type: PatternType, name: &str, entry: &AccessControlEntry) {
        let list = match pattern_type {
            PatternType::Literal if name == WILDCARD_RESOURCE => &mut self.wildcard,
            PatternType::Literal => match self.literal.get_mut(name) {
                Some(list) => list,
                None => return,
            },
            _ => match self.prefixed.get_mut(name) {
                Some(list) => list,
                None => return,
            },
        };
        list.retain(|e| e != entry);
        if !list.is_empty() || (name == WILDCARD_RESOURCE && pattern_type == PatternType::Literal) {
            return;
        }
        if pattern_type == PatternType::Literal {
            self.literal.remove(name);
        } else if self.prefixed.remove(name).is_some() {
            if let Some(count) = self.prefix_lens.get_mut(&name.len()) {
                *count -= 1;
                if *count == 0 {
                    self.prefix_lens.remove(&name.len());
                }
            }
        }
    }

    /// Every entry whose pattern applies to the resource `name` (rule 2).
    fn applicable<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a AccessControlEntry> {
        let literal = self.literal.get(name).into_iter().flatten();
        let prefixed = self
            .prefix_lens
            .range(..=name.len())
            .filter(|(len, _)| name.is_char_boundary(**len))
            .filter_map(|(len, _)| self.prefixed.get(&name[..*len]))
            .flatten();
        literal.chain(self.wildcard.iter()).chain(prefixed)
    }

    /// Every entry of the type with its pattern type and name.
    fn all(&self) -> impl Iterator<Item = (PatternType, &str, &AccessControlEntry)> {
        let wildcard = self.wildcard.iter().map(|e| (PatternType::Literal, WILDCARD_RESOURCE, e));
        let literal = self
            .literal
            .iter()
            .flat_map(|(n, es)| es.iter().map(move |e| (PatternType::Literal, n.as_str(), e)));
        let prefixed = self
            .prefixed
            .iter()
            .flat_map(|(n, es)| es.iter().map(move |e| (PatternType::Prefixed, n.as_str(), e)));
        wildcard.chain(literal).chain(prefixed)
    }
}

/// A set of ACLs with the index checks use. Adding a binding already present
/// changes nothing (Kafka's CreateAcls succeeds for it without a record).
#[derive(Debug, Clone, Default)]
pub struct AclCache {
    /// Every binding, in a stable order for DescribeAcls and the store.
    all: BTreeSet<AclBinding>,
    by_type: HashMap<ResourceType, TypeIndex>,
}

impl AclCache {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.all.len()
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &AclBinding> {
        self.all.iter()
    }

    pub fn contains(&self, binding: &AclBinding) -> bool {
        self.all.contains(binding)
    }

    /// Add a binding; false if it was already there.
    pub fn add(&mut self, binding: AclBinding) -> bool {
        if self.all.contains(&binding) {
            return false;
        }
        let p = binding.pattern();
        let index = self.by_type.entry(p.resource_type()).or_default();
        index.entries_mut(p.pattern_type(), p.name()).push(binding.entry().clone());
        self.all.insert(binding);
        true
    }

    /// Remove a binding; false if it was not there.
    pub fn remove(&mut self, binding: &AclBinding) -> bool {
        if !self.all.remove(binding) {
            return false;
        }
        let p = binding.pattern();
        if let Some(index) = self.by_type.get_mut(&p.resource_type()) {
            index.remove(p.pattern_type(), p.name(), binding.entry());
        }
        true
    }

    /// The bindings a DescribeAcls filter selects.
    pub fn describe(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        self.all.iter().filter(|b| filter.matches(b)).cloned().collect()
    }

    /// One DeleteAcls request, as Kafka's `AclControlManager.deleteAcls`:
    /// each filter is validated on its own and selects from the set as it
    /// was before the request (a binding two filters select is listed under
    /// both and removed once); then every selected binding is removed.
    pub fn delete(
        &mut self,
        filters: &[AclBindingFilter],
    ) -> Vec<Result<Vec<AclBinding>, AclError>> {
        let results: Vec<_> =
            filters.iter().map(|f| f.validate().map(|()| self.describe(f))).collect();
        for binding in results.iter().flatten().flatten() {
            self.remove(binding);
        }
        results
    }

    /// Every entry whose pattern applies to the resource `resource_type`/`name`:
    /// its LITERAL name, the LITERAL `*`, and each PREFIXED prefix of it.
    pub fn applicable<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a AccessControlEntry> {
        self.by_type.get(&resource_type).into_iter().flat_map(move |index| index.applicable(name))
    }

    /// Every entry of a resource type, with its pattern type and name.
    pub fn of_type(
        &self,
        resource_type: ResourceType,
    ) -> impl Iterator<Item = (PatternType, &str, &AccessControlEntry)> {
        self.by_type.get(&resource_type).into_iter().flat_map(TypeIndex::all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::acl::{
        AccessControlEntryFilter, AclOperation as Op, AclPermissionType as Perm,
        ResourcePatternFilter,
    };
    use PatternType as Pt;
    use ResourceType as Rt;

    fn topic(name: &str, pt: Pt, who: &str, op: Op) -> AclBinding {
        AclBinding::new(Rt::Topic, name, pt, who, "*", op, Perm::Allow).unwrap()
    }

    fn applicable(cache: &AclCache, name: &str) -> Vec<Op> {
        let mut ops: Vec<Op> = cache.applicable(Rt::Topic, name).map(|e| e.operation()).collect();
        ops.sort();
        ops
    }

    #[test]
    fn index_finds_literal_wildcard_and_every_prefix() {
        let mut cache = AclCache::new();
        cache.add(topic("abc", Pt::Literal, "User:a", Op::Read));
        cache.add(topic("ab", Pt::Prefixed, "User:a", Op::Write));
        cache.add(topic("a", Pt::Prefixed, "User:a", Op::Create));
        cache.add(topic("abcd", Pt::Prefixed, "User:a", Op::Delete));
        cache.add(topic("*", Pt::Literal, "User:a", Op::Alter));
        cache.add(topic("é", Pt::Prefixed, "User:a", Op::Describe));
        assert_eq!(applicable(&cache, "abc"), [Op::Read, Op::Write, Op::Create, Op::Alter]);
        assert_eq!(applicable(&cache, "ab"), [Op::Write, Op::Create, Op::Alter]);
        assert_eq!(applicable(&cache, "abcd"), [Op::Write, Op::Create, Op::Delete, Op::Alter]);
        assert_eq!(applicable(&cache, "b"), [Op::Alter]);
        assert_eq!(applicable(&cache, "éa"), [Op::Alter, Op::Describe]);
        assert_eq!(applicable(&cache, "aé"), [Op::Create, Op::Alter], "no prefix inside a char");
        assert_eq!(cache.applicable(Rt::Group, "abc").count(), 0);
        assert_eq!(cache.of_type(Rt::Topic).count(), 6);
    }

    #[test]
    fn sets_removal_and_delete_filters() {
        let mut cache = AclCache::new();
        let pre = topic("ab", Pt::Prefixed, "User:a", Op::Read);
        let lit = topic("abc", Pt::Literal, "User:a", Op::Read);
        let wild = topic("*", Pt::Literal, "User:b", Op::Read);
        assert!(cache.add(pre.clone()) && cache.add(lit.clone()) && cache.add(wild.clone()));
        assert!(!cache.add(pre.clone()), "a duplicate is no second ACL");
        assert_eq!(cache.len(), 3);
        assert!(cache.contains(&lit));
        let match_abc = AclBindingFilter {
            pattern: ResourcePatternFilter {
                resource_type: Rt::Topic,
                name: Some("abc".into()),
                pattern_type: Pt::Match,
            },
            entry: AccessControlEntryFilter::any(),
        };
        assert_eq!(cache.describe(&match_abc), vec![wild.clone(), pre.clone(), lit.clone()]);
        let mut only_a = AclBindingFilter::any();
        only_a.entry.principal = Some("User:a".into());
        let mut unknown = AclBindingFilter::any();
        unknown.entry.operation = Op::Unknown;
        let results = cache.delete(&[match_abc, only_a, unknown]);
        assert_eq!(results[0].as_ref().unwrap().len(), 3);
        assert_eq!(results[1].as_ref().unwrap(), &vec![pre.clone(), lit.clone()], "listed twice");
        assert_eq!(results[2], Err(AclError::UnknownEntryFilter));
        assert!(cache.is_empty());
        assert_eq!(applicable(&cache, "abc"), []);
        let mut c = AclCache::new();
        c.add(pre.clone());
        c.add(topic("ab", Pt::Prefixed, "User:a", Op::Write));
        assert!(c.remove(&pre) && !c.remove(&pre));
        assert_eq!(applicable(&c, "abx"), [Op::Write]);
        c.remove(&topic("ab", Pt::Prefixed, "User:a", Op::Write));
        assert!(c.is_empty() && c.by_type[&Rt::Topic].prefix_lens.is_empty());
        assert!(c.by_type[&Rt::Topic].prefixed.is_empty());
    }
}
