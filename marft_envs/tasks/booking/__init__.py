"""The booking family: a coordinator, calendar, location and booking agents with tools over SQLite.

- ``marft/Booking-v0`` (:class:`Booking`): the coordinator's plan sets each round's graph.
- ``marft/BookingFixed-v0`` (:class:`BookingFixed`): calendar and location -> booking, every round.
- ``marft/BookingDecPOMDP-v0`` (:class:`BookingDecPOMDP`): no same-round dependencies.
"""

from marft_envs.tasks.booking.coordinated import Booking
from marft_envs.tasks.booking.decpomdp import BookingDecPOMDP
from marft_envs.tasks.booking.fixed import BookingFixed

__all__ = ["Booking", "BookingDecPOMDP", "BookingFixed"]
