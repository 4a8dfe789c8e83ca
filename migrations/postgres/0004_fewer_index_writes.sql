-- Fewer index writes per run: a 3-step run's row is written four times in a few milliseconds,
-- and each write that is not in place adds an entry to every index of `runs`.

-- A turn that leaves its run suspended changes no indexed column, so PostgreSQL can update the
-- row in place (a HOT update, no index entry at all), but only when the row's page has room for
-- the new version. Pages filled to the default 100% have none; 70% leaves room for a few
-- versions of each row until the page is pruned.
ALTER TABLE runs SET (fillfactor = 70);

-- Most runs have no tags and no search attributes; their GIN entries were written and never
-- read. A containment filter names the predicate too (`tags <> '[]'`), so these still serve it.
DROP INDEX runs_tags;
CREATE INDEX runs_tags ON runs USING GIN (tags jsonb_path_ops) WHERE tags <> '[]'::jsonb;
DROP INDEX runs_search_attributes;
CREATE INDEX runs_search_attributes ON runs USING GIN (search_attributes jsonb_path_ops)
    WHERE search_attributes <> '{}'::jsonb;

-- A root run is found by its id; only the runs below it (children, successors) need the root
-- index.
DROP INDEX runs_root;
CREATE INDEX runs_root ON runs (root_run_id, created_at DESC, id DESC) WHERE root_run_id <> id;
