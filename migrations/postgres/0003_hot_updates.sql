-- A turn that leaves a run's indexed columns alone (a sticky turn: suspended to suspended, no
-- wake time) can be a HOT update, which writes no index entry, only if the new row version fits
-- on the same page. Runs are inserted in bursts and fill their pages; leaving 30% free keeps
-- those updates HOT instead of rewriting all of the dashboard's indexes.
ALTER TABLE runs SET (fillfactor = 70);
