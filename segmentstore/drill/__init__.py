"""Recovery drills: put load on a deployment, break it the way production breaks, and prove
that nothing acknowledged was lost and how long recovery took (``segmentstore drill``)."""
