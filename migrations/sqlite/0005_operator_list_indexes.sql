-- The operator's list across namespaces, filtered by status or workflow, newest first (keyset):
-- without these, a status filter walked every run in that status and sorted them.
CREATE INDEX runs_status_created ON runs (status, created_at DESC, id DESC);
CREATE INDEX runs_workflow_created ON runs (workflow, created_at DESC, id DESC);
