package learn

import "time"

// Episode detection: failures of one kind on one provider are an episode
// when they come in a burst (most of a run of attempts fail so), and
// background otherwise. The detector sees the provider's attempts in time
// order, one at a time, in a fixed amount of memory.
const (
	ringSize      = 20               // the attempts the detector looks back over
	openHits      = 5                // an episode needs at least this many failures ...
	openShare     = 0.5              // ... being at least this share of the recent attempts
	closeShare    = 0.2              // it ends when the recent share falls below this ...
	quietEnd      = 30 * time.Second // ... or no failure came for this long
	lookBack      = time.Minute      // recent attempts: at most this old
	maxEpisodes   = 50               // per provider and kind; later ones count as background
	minEpisodeP   = 0.3              // a learnt episode fails at least this share
	mergeEpisodes = quietEnd         // an episode starting this soon after the last continues it
)

// episode is one burst: [start, end] and its failures among its attempts.
type episode struct {
	start, end     time.Time
	hits, attempts int
}

type ringEntry struct {
	t   time.Time
	hit bool
}

// detector finds one kind's episodes and counts its background rate.
type detector struct {
	ring     [ringSize]ringEntry
	n, next  int
	open     bool
	cur      episode
	sinceHit int // attempts in the open episode after its last failure

	bgHits, bgAttempts int
	episodes           []episode
	dropped            int // episodes past maxEpisodes, counted as background
	// The background counters when the last episode closed, so a merge
	// moves what came between into the episode.
	bgHitsAtClose, bgAttemptsAtClose int
}

func (d *detector) push(t time.Time, hit bool) {
	d.ring[d.next] = ringEntry{t, hit}
	d.next = (d.next + 1) % ringSize
	d.n = min(d.n+1, ringSize)
}

// recent returns the ring's entries no older than lookBack before t, oldest
// first, into buf.
func (d *detector) recent(t time.Time, buf []ringEntry) []ringEntry {
	buf = buf[:0]
	for i := d.n; i > 0; i-- {
		e := d.ring[(d.next-i+ringSize)%ringSize]
		if t.Sub(e.t) <= lookBack {
			buf = append(buf, e)
		}
	}
	return buf
}

func share(es []ringEntry) (hits int, s float64) {
	for _, e := range es {
		if e.hit {
			hits++
		}
	}
	if len(es) == 0 {
		return 0, 0
	}
	return hits, float64(hits) / float64(len(es))
}

// add counts one attempt at t; hit: it failed with the detector's kind.
func (d *detector) add(t time.Time, hit bool) {
	d.push(t, hit)
	var buf [ringSize]ringEntry
	rec := d.recent(t, buf[:0])
	if !d.open {
		d.bgAttempts++
		if hit {
			d.bgHits++
		}
		if !hit {
			return
		}
		if h, s := share(rec); h >= openHits && s >= openShare {
			d.openAt(rec)
		}
		return
	}
	d.cur.attempts++
	if hit {
		d.cur.hits++
		d.cur.end = t
		d.sinceHit = 0
	} else {
		d.sinceHit++
	}
	if _, s := share(rec); s < closeShare || t.Sub(d.cur.end) > quietEnd {
		d.close()
	}
}

// openAt opens an episode at the first failure of the recent run, moving
// the attempts from there on out of the background.
func (d *detector) openAt(rec []ringEntry) {
	first := 0
	for !rec[first].hit {
		first++
	}
	run := rec[first:]
	hits, _ := share(run)
	d.bgAttempts -= len(run)
	d.bgHits -= hits
	cur := episode{start: run[0].t, end: run[len(run)-1].t, hits: hits, attempts: len(run)}
	if n := len(d.episodes); n > 0 && cur.start.Sub(d.episodes[n-1].end) <= mergeEpisodes {
		// A dip inside one burst: continue the last episode.
		last := d.episodes[n-1]
		d.episodes = d.episodes[:n-1]
		between, betweenHits := d.bgAttempts-d.bgAttemptsAtClose, d.bgHits-d.bgHitsAtClose
		d.bgAttempts, d.bgHits = d.bgAttemptsAtClose, d.bgHitsAtClose
		cur.start = last.start
		cur.hits += last.hits + betweenHits
		cur.attempts += last.attempts + between
	}
	d.open, d.cur, d.sinceHit = true, cur, 0
}

// close ends the open episode at its last failure; the attempts after it
// go back to the background.
func (d *detector) close() {
	if !d.open {
		return
	}
	d.open = false
	d.cur.attempts -= d.sinceHit
	d.bgAttempts += d.sinceHit
	if len(d.episodes) >= maxEpisodes {
		d.bgHits += d.cur.hits
		d.bgAttempts += d.cur.attempts
		d.dropped++
	} else {
		d.episodes = append(d.episodes, d.cur)
	}
	d.bgHitsAtClose, d.bgAttemptsAtClose = d.bgHits, d.bgAttempts
	d.sinceHit = 0
}

// finish closes an open episode and folds weak ones into the background.
func (d *detector) finish() {
	d.close()
	kept := d.episodes[:0]
	for _, e := range d.episodes {
		if e.attempts == 0 || float64(e.hits)/float64(e.attempts) < minEpisodeP {
			d.bgHits += e.hits
			d.bgAttempts += e.attempts
			continue
		}
		kept = append(kept, e)
	}
	d.episodes = kept
}

// background is the failure rate outside the episodes.
func (d *detector) background() float64 {
	if d.bgAttempts <= 0 {
		return 0
	}
	return float64(max(0, d.bgHits)) / float64(d.bgAttempts)
}
