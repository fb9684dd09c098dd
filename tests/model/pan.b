	switch (t->back) {
	default: Uerror("bad return move");
	case  0: goto R999; /* nothing to undo */

		 /* PROC :init: */

	case 3: // STATE 1
		;
		((P3 *)_this)->k = trpt->bup.oval;
		;
		goto R999;
;
		;
		
	case 5: // STATE 3
		;
		;
		delproc(0, now._nr_pr-1);
		;
		goto R999;

	case 6: // STATE 4
		;
		((P3 *)_this)->k = trpt->bup.oval;
		;
		goto R999;

	case 7: // STATE 10
		;
		((P3 *)_this)->k = trpt->bup.oval;
		;
		goto R999;
;
		;
		
	case 9: // STATE 12
		;
		;
		delproc(0, now._nr_pr-1);
		;
		goto R999;

	case 10: // STATE 13
		;
		((P3 *)_this)->k = trpt->bup.oval;
		;
		goto R999;

	case 11: // STATE 19
		;
		;
		delproc(0, now._nr_pr-1);
		;
		goto R999;
;
		;
		;
		;
		
	case 14: // STATE 23
		;
		p_restor(II);
		;
		;
		goto R999;

		 /* PROC Closer */

	case 15: // STATE 1
		;
		now.closed = trpt->bup.oval;
		;
		goto R999;

	case 16: // STATE 2
		;
		((P2 *)_this)->i = trpt->bup.oval;
		;
		goto R999;
;
		;
		
	case 18: // STATE 10
		;
		((P2 *)_this)->i = trpt->bup.ovals[2];
		now.woken[ Index(((P2 *)_this)->i, 3) ] = trpt->bup.ovals[1];
		now.reg[ Index(((P2 *)_this)->i, 3) ] = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 3);
		goto R999;

	case 19: // STATE 10
		;
		((P2 *)_this)->i = trpt->bup.oval;
		;
		goto R999;

	case 20: // STATE 18
		;
		p_restor(II);
		;
		;
		goto R999;

		 /* PROC Consumer */

	case 21: // STATE 4
		;
		((P1 *)_this)->got = trpt->bup.ovals[2];
		now.c_head = trpt->bup.ovals[1];
		((P1 *)_this)->t = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 3);
		goto R999;
;
		
	case 22: // STATE 8
		goto R999;

	case 23: // STATE 6
		;
		((P1 *)_this)->got = trpt->bup.oval;
		;
		goto R999;

	case 24: // STATE 10
		;
	/* 0 */	((P1 *)_this)->got = trpt->bup.oval;
		;
		;
		goto R999;

	case 25: // STATE 12
		;
	/* 0 */	((P1 *)_this)->got = trpt->bup.oval;
		;
		;
		goto R999;

	case 26: // STATE 13
		;
		now.delivered = trpt->bup.oval;
		;
		goto R999;

	case 27: // STATE 18
		;
		((P1 *)_this)->cl = trpt->bup.oval;
		;
		goto R999;

	case 28: // STATE 19
		;
		((P1 *)_this)->a = trpt->bup.oval;
		;
		goto R999;

	case 29: // STATE 20
		;
		((P1 *)_this)->b = trpt->bup.oval;
		;
		goto R999;

	case 30: // STATE 21
		;
	/* 1 */	((P1 *)_this)->a = trpt->bup.ovals[1];
	/* 0 */	((P1 *)_this)->cl = trpt->bup.ovals[0];
		;
		;
		ungrab_ints(trpt->bup.ovals, 2);
		goto R999;

	case 31: // STATE 22
		;
		((P1 *)_this)->c = trpt->bup.oval;
		;
		goto R999;

	case 32: // STATE 23
		;
	/* 1 */	((P1 *)_this)->b = trpt->bup.ovals[1];
	/* 0 */	((P1 *)_this)->c = trpt->bup.ovals[0];
		;
		;
		ungrab_ints(trpt->bup.ovals, 2);
		goto R999;

	case 33: // STATE 32
		;
		now.reg[ Index(((P1 *)_this)->me, 3) ] = trpt->bup.oval;
		;
		goto R999;

	case 34: // STATE 33
		;
		now.deq_wait = trpt->bup.oval;
		;
		goto R999;

	case 35: // STATE 34
		;
		((P1 *)_this)->c = trpt->bup.oval;
		;
		goto R999;

	case 36: // STATE 35
		;
		((P1 *)_this)->b = trpt->bup.oval;
		;
		goto R999;

	case 37: // STATE 36
		;
		((P1 *)_this)->cl = trpt->bup.oval;
		;
		goto R999;

	case 38: // STATE 37
		;
		((P1 *)_this)->a = trpt->bup.oval;
		;
		goto R999;

	case 39: // STATE 38
		;
	/* 3 */	((P1 *)_this)->a = trpt->bup.ovals[3];
	/* 2 */	((P1 *)_this)->cl = trpt->bup.ovals[2];
	/* 1 */	((P1 *)_this)->b = trpt->bup.ovals[1];
	/* 0 */	((P1 *)_this)->c = trpt->bup.ovals[0];
		;
		;
		ungrab_ints(trpt->bup.ovals, 4);
		goto R999;

	case 40: // STATE 40
		;
		now.reg[ Index(((P1 *)_this)->me, 3) ] = trpt->bup.oval;
		;
		goto R999;
;
		
	case 41: // STATE 58
		goto R999;

	case 42: // STATE 42
		;
		now.woken[ Index(((P1 *)_this)->me, 3) ] = trpt->bup.oval;
		;
		goto R999;

	case 43: // STATE 43
		;
		((P1 *)_this)->i = trpt->bup.oval;
		;
		goto R999;

	case 44: // STATE 46
		;
		now.woken[ Index(((P1 *)_this)->i, 3) ] = trpt->bup.ovals[1];
		now.reg[ Index(((P1 *)_this)->i, 3) ] = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 2);
		goto R999;

	case 45: // STATE 49
		;
		((P1 *)_this)->i = trpt->bup.oval;
		;
		goto R999;

	case 46: // STATE 50
		;
	/* 0 */	((P1 *)_this)->i = trpt->bup.oval;
		;
		;
		goto R999;
;
		;
		
	case 48: // STATE 65
		;
		now.woken[ Index(((P1 *)_this)->me, 3) ] = trpt->bup.oval;
		;
		goto R999;

	case 49: // STATE 68
		;
		p_restor(II);
		;
		;
		goto R999;

		 /* PROC Producer */
;
		;
		
	case 51: // STATE 7
		;
		now.p_head = trpt->bup.ovals[1];
		((P0 *)_this)->t = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 2);
		goto R999;
;
		;
		
	case 53: // STATE 10
		;
		now.tomb[ Index(((P0 *)_this)->t, 2) ] = trpt->bup.oval;
		;
		goto R999;

	case 54: // STATE 12
		;
		now.tomb[ Index(((P0 *)_this)->t, 2) ] = trpt->bup.oval;
		;
		goto R999;
;
		;
		
	case 56: // STATE 16
		;
		now.p_tail = trpt->bup.oval;
		;
		goto R999;

	case 57: // STATE 18
		;
		now.real_published = trpt->bup.ovals[1];
	/* 0 */	((P0 *)_this)->t = trpt->bup.ovals[0];
		;
		;
		ungrab_ints(trpt->bup.ovals, 2);
		goto R999;
;
		
	case 58: // STATE 21
		goto R999;
;
		;
		;
		;
		
	case 61: // STATE 25
		;
		((P0 *)_this)->i = trpt->bup.oval;
		;
		goto R999;
;
		;
		
	case 63: // STATE 33
		;
		((P0 *)_this)->i = trpt->bup.ovals[2];
		now.woken[ Index(((P0 *)_this)->i, 3) ] = trpt->bup.ovals[1];
		now.reg[ Index(((P0 *)_this)->i, 3) ] = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 3);
		goto R999;

	case 64: // STATE 33
		;
		((P0 *)_this)->i = trpt->bup.oval;
		;
		goto R999;

	case 65: // STATE 42
		;
		((P0 *)_this)->i = trpt->bup.oval;
		;
		goto R999;

	case 66: // STATE 45
		;
		now.woken[ Index(((P0 *)_this)->i, 3) ] = trpt->bup.ovals[1];
		now.reg[ Index(((P0 *)_this)->i, 3) ] = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 2);
		goto R999;

	case 67: // STATE 48
		;
		((P0 *)_this)->i = trpt->bup.oval;
		;
		goto R999;

	case 68: // STATE 49
		;
	/* 0 */	((P0 *)_this)->i = trpt->bup.oval;
		;
		;
		goto R999;

	case 69: // STATE 63
		;
		p_restor(II);
		;
		;
		goto R999;
	}

