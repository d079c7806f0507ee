-- +goose Up
-- Let the reconcile path's row updates be HOT (heap-only tuples: no index
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

-- +goose Down
ALTER TABLE resources RESET (fillfactor);
CREATE INDEX resources_status_idx ON resources (status, id);
