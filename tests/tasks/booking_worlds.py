"""A hand-made booking world for the booking tests (small enough to reason about by hand)."""

from marft_envs.tasks.booking.world import Booking, Busy, Landmark, Person, Venue, World


def tiny_world() -> World:
    """A hand-made world: Ana Silva, Ana Costa and Bo Chen; two venues; one booking."""
    people = (Person(1, "Ana", "Silva"), Person(2, "Ana", "Costa"), Person(3, "Bo", "Chen"))
    venues = (Venue(1, "Maple Room", 4, 8 * 60, 18 * 60, 100, 1.0, 0.0), Venue(2, "Harbor Hall", 2, 9 * 60, 12 * 60, 60, 0.0, 3.0))
    busy = (
        Busy(1, "Tue", 9 * 60, 10 * 60, "standup"),
        Busy(3, "Tue", 9 * 60 + 30, 11 * 60, "review"),
        Busy(3, "Tue", 15 * 60, 16 * 60, "call"),
    )
    landmarks = (
        Landmark(1, "office", 0.0, 0.0),
        Landmark(2, "station", 0.0, 4.0),
        Landmark(3, "library", 2.0, 2.0),
        Landmark(4, "hotel", -1.0, -1.0),
    )
    bookings = (Booking(1, 1, "Tue", 12 * 60, 13 * 60, (1,), "lunch"),)
    return World(people, landmarks, venues, busy, bookings)
