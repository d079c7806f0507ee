-- +goose Up
-- Two changes for the hot paths (docs/design/performance.md). First, let the
-- reconcile path's row updates be HOT (heap-only tuples: no index
-- entry written, docs/design/performance.md). A reconcile updates a resource
-- row three times (the dispatch record, the lease, the completion) and two of
-- them change its status: with an index on status every such update wrote a
-- new entry into each of the table's seven indexes, the labels' GIN index
-- among them. Without it, and with a fifth of each page left free for the
-- new row versions, nearly all of them (95-98% in the pgstore benchmark)
-- write no index entry. A status filter on lists is served by the type
-- index or by the primary key in id order, as a broad label selector is.
DROP INDEX resources_status_idx;
ALTER TABLE resources SET (fillfactor = 80);

-- The by-name read must not depend on the planner's statistics either: with
-- the name unique per (type, version, namespace) in that column order, a
-- table not yet analysed reads by resources_type_ns_id_idx instead, walking
-- every resource of the type in the namespace (32 ms at 100,000, 198 ms at
-- 185,000). With the name first, the read's only indexable condition is the
-- name (pgstore.GetResource writes the others as expressions), so it is this
-- index whatever the statistics say. The rule is the same.
ALTER TABLE resources DROP CONSTRAINT resources_type_name_key;
ALTER TABLE resources ADD CONSTRAINT resources_type_name_key
    UNIQUE (name, namespace, resource_type_name, resource_type_version);

-- +goose Down
ALTER TABLE resources DROP CONSTRAINT resources_type_name_key;
ALTER TABLE resources ADD CONSTRAINT resources_type_name_key
    UNIQUE (resource_type_name, resource_type_version, namespace, name);
ALTER TABLE resources RESET (fillfactor);
CREATE INDEX resources_status_idx ON resources (status, id);
